package settings

import (
	"os"
	"runtime/debug"
	"testing"
)

// TuneGC sets GCPercent unless GOGC is set, and reports what is in force.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	for _, tc := range []struct {
		name string
		gogc string // "" unset
		want int
	}{
		{"unset", "", GCPercent},
		{"set by the operator", "150", 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			if tc.gogc == "" {
				t.Setenv("GOGC", "")
				if err := os.Unsetenv("GOGC"); err != nil {
					t.Fatal(err)
				}
			} else {
				t.Setenv("GOGC", tc.gogc)
				debug.SetGCPercent(tc.want) // what the runtime read at start
			}
			if got := TuneGC(); got != tc.want {
				t.Fatalf("TuneGC() = %d, want %d", got, tc.want)
			}
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Fatalf("GC percent in force %d, want %d", got, tc.want)
			}
		})
	}
}
