package validate

import (
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

// tool runs an optional external checker when it is installed; it reports
// whether it ran.
func tool(t *testing.T, name string, args ...string) bool {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		return false
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %v: %v\n%s", name, args, err, out)
	} else {
		t.Logf("%s %v: ok", name, args)
	}
	return true
}
