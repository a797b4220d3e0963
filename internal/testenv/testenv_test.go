package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// helperEnv makes TestMissingProgram's child process run the check
// instead of returning at once.
const helperEnv = "TESTENV_HELPER"

// TestMissingProgram runs the test binary again, needing a program that
// does not exist, with and without CI set: it skips on a developer's
// machine and fails in CI.
func TestMissingProgram(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		Need(t, "bidgate-no-such-program")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ci   string
		fail bool
		want string
	}{
		{"", false, "--- SKIP: TestMissingProgram"},
		{"true", true, "--- FAIL: TestMissingProgram"},
	}
	for _, tc := range tests {
		cmd := exec.Command(self, "-test.run=^TestMissingProgram$", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"=1", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.fail || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "bidgate-no-such-program is not on PATH") {
			t.Errorf("with CI=%q (%v):\n%s\nwant %q and the program's name", tc.ci, err, out, tc.want)
		}
	}
}

// A program that is there is found, whatever CI says.
func TestNeedFinds(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := Need(t, self); got != self {
		t.Fatalf("Need(%q) = %q", self, got)
	}
	if got := Find(t, self); got != self {
		t.Fatalf("Find(%q) = %q", self, got)
	}
}
