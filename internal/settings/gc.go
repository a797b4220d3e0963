package settings

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage-collection target of bidgate's processes (a
// node, bidbench and its HTTP floor) when GOGC is not set: the heap may
// grow to nine times what is live before a collection. Each collection
// scans every goroutine's stack, and a node holding 2,000 /ws/me
// connections (two goroutines each) spent 8% of its CPU on stack scans at
// Go's default (100). In a flash sale with those listeners its bids' p99
// was 2.0x that of the build before notices (at Go's default) when
// collecting at 100, 1.6x at 400, 1.1x at 800 (about 600 MB resident
// then). The floor gets the same target, so that bidgate and the floor
// are compared on equal terms.
const GCPercent = 800

// TuneGC applies GCPercent unless GOGC is set (the Go runtime reads it,
// as it reads GOMEMLIMIT, a cap worth setting where memory is short), and
// reports the target in force.
func TuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
