// Package testenv is the one rule for a test that needs something from its
// environment (a program on PATH, a setting): on a developer's machine it
// skips when that is missing, so the rest of the suite still runs; in CI
// (the environment variable CI set to anything) it fails, so a check whose
// tool CI forgot to install cannot pass by never running.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI, where nothing may be missing.
func InCI() bool { return os.Getenv("CI") != "" }

// Missing ends tb because what it needs is not there: a failure in CI, a
// skip elsewhere. The message says what is missing and how to get it.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatalf("%s (CI must provide it)", msg)
	}
	tb.Skip(msg)
}

// Need returns the path of program on PATH; without it, Missing ends tb.
func Need(tb testing.TB, program string) string {
	tb.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		Missing(tb, "%s is not on PATH", program)
	}
	return path
}

// Find returns the path of program on PATH for a test that can do without
// it: "" when it is missing, except in CI, where that fails tb.
func Find(tb testing.TB, program string) string {
	tb.Helper()
	path, err := exec.LookPath(program)
	if err != nil && InCI() {
		tb.Fatalf("%s is not on PATH (CI must provide it)", program)
	}
	return path
}
