package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MachineUse is the whole machine over a span: every process's CPU
// (bidgate's, its stores', the broker's, bidbench's and anything else the
// box runs) and how long threads ready to run waited for a CPU. A
// loopback benchmark shares the box with everything it measures: once it
// is busy, every hop of a request waits its turn for a CPU, and latency
// says more about the box than about bidgate.
type MachineUse struct {
	CPUs      int     `json:"cpus"`
	BusyCores float64 `json:"busyCores"` // CPUs' time not idle, per second of the span
	// CPUWait is the share of the span during which at least one thread
	// was ready to run and waited for a CPU (Linux's pressure stall
	// information, "some"); nil when the kernel does not report it, and
	// CPUWaitMissing says why.
	CPUWait        *float64 `json:"cpuWaitShare,omitempty"`
	CPUWaitMissing string   `json:"cpuWaitMissing,omitempty"`
}

// machineSample is the machine's counters at one moment, in seconds.
type machineSample struct {
	cpus int
	// All CPUs' time, not idle and in all, in ticks: kept whole so that a
	// fully busy span divides to exactly its CPUs.
	busy, total uint64
	err         error
	waited      float64 // some thread waited for a CPU
	waitedErr   error
}

// machineBetween is the machine's use from a to b, over wall seconds.
func machineBetween(a, b machineSample, wall float64) (*MachineUse, string) {
	switch {
	case a.err != nil:
		return nil, a.err.Error()
	case b.err != nil:
		return nil, b.err.Error()
	case b.total <= a.total || b.busy < a.busy:
		return nil, "the machine's CPU counters did not advance"
	}
	m := &MachineUse{CPUs: b.cpus, BusyCores: float64(b.cpus) * float64(b.busy-a.busy) / float64(b.total-a.total)}
	switch {
	case a.waitedErr != nil:
		m.CPUWaitMissing = a.waitedErr.Error()
	case b.waitedErr != nil:
		m.CPUWaitMissing = b.waitedErr.Error()
	case b.waited < a.waited || wall <= 0:
		m.CPUWaitMissing = "the CPU pressure counter did not advance"
	default:
		w := min((b.waited-a.waited)/wall, 1)
		m.CPUWait = &w
	}
	return m, ""
}

// Sentence is m in words, for a summary line.
func (m *MachineUse) Sentence() string {
	s := fmt.Sprintf("machine %.2f of %d CPUs busy", m.BusyCores, m.CPUs)
	if m.CPUWait == nil {
		return s + " (CPU wait unknown: " + m.CPUWaitMissing + ")"
	}
	return s + fmt.Sprintf(", a thread waiting for a CPU %.0f %% of the time", 100**m.CPUWait)
}

// parseCPUTimes reads /proc/stat's first line, "cpu user nice system
// idle iowait irq softirq steal ...", in ticks: the time of all CPUs not
// idle (idle and iowait are), and in all. guest and guest_nice, after
// steal, are counted in user and nice already.
func parseCPUTimes(stat string) (busy, total uint64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: first line %.60q is not the CPUs' total", line)
	}
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: CPU time %q: %w", v, err)
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, nil
}

// parseCPUPressure reads the microseconds during which some thread waited
// for a CPU from /proc/pressure/cpu ("some avg10=… total=N").
func parseCPUPressure(psi string) (float64, error) {
	for line := range strings.Lines(psi) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				us, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("/proc/pressure/cpu: total %q: %w", v, err)
				}
				return float64(us) / 1e6, nil
			}
		}
	}
	return 0, errNoPressure
}

// onlineCPUs counts /proc/stat's per-CPU lines ("cpu0", "cpu1", …).
func onlineCPUs(stat string) int {
	n := 0
	for line := range strings.Lines(stat) {
		if rest, ok := strings.CutPrefix(line, "cpu"); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
			n++
		}
	}
	return n
}

var errNoPressure = errors.New(`/proc/pressure/cpu has no "some … total=" line`)
