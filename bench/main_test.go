package bench

import (
	"os"
	"testing"
)

// TestMain lets the test binary be the floor server too (reads, --floor):
// startFloor runs this executable with FloorCommand, as bidbench does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == FloorCommand {
		os.Exit(FloorMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
