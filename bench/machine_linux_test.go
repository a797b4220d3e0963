//go:build linux

package bench

import (
	"crypto/sha256"
	"testing"
)

// TestReadMachine reads this machine's real /proc: the counters advance
// across some work of this process's own.
func TestReadMachine(t *testing.T) {
	a := readMachine()
	if a.err != nil {
		t.Fatal(a.err)
	}
	sum := sha256.Sum256(nil)
	for range 1_000_000 { // some 0.1 s: several ticks of /proc/stat
		sum = sha256.Sum256(sum[:])
	}
	b := readMachine()
	m, missing := machineBetween(a, b, 1)
	if m == nil {
		t.Fatalf("missing: %s", missing)
	}
	if m.CPUs < 1 || m.BusyCores <= 0 || m.BusyCores > float64(m.CPUs) {
		t.Errorf("%+v", m)
	}
	if m.CPUWait == nil {
		t.Logf("no CPU pressure here: %s", m.CPUWaitMissing)
	}
}
