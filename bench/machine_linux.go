//go:build linux

package bench

import (
	"fmt"
	"os"
	"runtime"
)

// readMachine reads the machine's CPU times from /proc/stat and, where
// the kernel has pressure stall information, its CPU pressure.
func readMachine() machineSample {
	var s machineSample
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		s.err = fmt.Errorf("read the machine's CPU times: %w", err)
		return s
	}
	busy, total, err := parseCPUTimes(string(b))
	if err != nil {
		s.err = err
		return s
	}
	// Online CPUs, as the ticks of /proc/stat's total count them; the
	// process's affinity (runtime.NumCPU) may be narrower.
	s.cpus = onlineCPUs(string(b))
	s.busy, s.total = busy, total
	if s.cpus == 0 {
		s.cpus = runtime.NumCPU()
	}
	if b, err = os.ReadFile("/proc/pressure/cpu"); err != nil {
		s.waitedErr = fmt.Errorf("no CPU pressure from the kernel: %w", err)
	} else {
		s.waited, s.waitedErr = parseCPUPressure(string(b))
	}
	return s
}
