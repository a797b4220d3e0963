package validate

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func runHelp(t *testing.T, bin string) string {
	t.Helper()
	// --help exits with status 0 or 2 depending on the flag package's mode;
	// only the text matters.
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	if len(out) == 0 {
		t.Fatalf("%s serve --help printed nothing", bin)
	}
	return string(out)
}

// missing ends t because something it needs from its environment is not
// there: a skip on a developer's machine, a failure in CI (CI set), so that
// a check whose tool CI lacks cannot pass by never running. It is the rule
// of the main module's internal/testenv, copied: this module is separate so
// that the main one does not carry its Kubernetes and compose dependencies,
// and importing the main one back would tie the two modules' versions.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI must provide it)", msg)
	}
	t.Skip(msg)
}

// need returns the path of program on PATH; without it, missing ends t.
func need(t *testing.T, program, install string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		missing(t, "%s is not on PATH (%s)", program, install)
	}
	return path
}

// tool runs an external checker, which the test needs.
func tool(t *testing.T, name, install string, args ...string) {
	t.Helper()
	out, err := exec.Command(need(t, name, install), args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %v: %v\n%s", name, args, err, out)
	} else {
		t.Logf("%s %v: ok", name, args)
	}
}
