package bench

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCPUTimes(t *testing.T) {
	for _, tc := range []struct {
		name, stat  string
		busy, total uint64
		cpus        int
		err         bool
	}{
		{"two CPUs", "cpu  100 5 50 800 20 0 10 3 7 0\ncpu0 50 2 25 400 10 0 5 1 3 0\ncpu1 50 3 25 400 10 0 5 2 4 0\nintr 1 2\n", 168, 988, 2, false},
		{"older kernel, no guest fields", "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", 27, 36, 1, false},
		{"too few fields", "cpu  1 2 3 4\n", 0, 0, 0, true},
		{"not the total", "cpu0 1 2 3 4 5 6 7 8 9 10\n", 0, 0, 1, true},
		{"not a number", "cpu  1 2 x 4 5 6 7 8 9 10\n", 0, 0, 0, true},
		{"empty", "", 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy, total, err := parseCPUTimes(tc.stat)
			if (err != nil) != tc.err || busy != tc.busy || total != tc.total {
				t.Errorf("busy %d, total %d, err %v; want %d, %d, error %v", busy, total, err, tc.busy, tc.total, tc.err)
			}
			if n := onlineCPUs(tc.stat); n != tc.cpus {
				t.Errorf("%d CPUs, want %d", n, tc.cpus)
			}
		})
	}
}

func TestParseCPUPressure(t *testing.T) {
	for _, tc := range []struct {
		name, psi string
		want      float64
		err       bool
	}{
		{"some and full", "some avg10=73.40 avg60=60.15 avg300=59.44 total=1092985210\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 1092.98521, false},
		{"some only", "some avg10=0.00 avg60=0.00 avg300=0.00 total=42", 0.000042, false},
		{"no some line", "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", 0, true},
		{"bad total", "some avg10=0.00 total=x\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUPressure(tc.psi)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("%v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestMachineBetween(t *testing.T) {
	at := func(busy, total uint64, waited float64) machineSample {
		return machineSample{cpus: 2, busy: busy, total: total, waited: waited}
	}
	noPSI := errors.New("no CPU pressure from the kernel")
	for _, tc := range []struct {
		name     string
		a, b     machineSample
		busy     float64
		wait     float64 // -1: unknown
		missing  bool
		sentence string
	}{
		{"busy box", at(10, 100, 5), at(29, 120, 12.3), 1.9, 0.73, false, "machine 1.90 of 2 CPUs busy, a thread waiting for a CPU 73 % of the time"},
		// Large counters, as a box up for weeks has: in seconds as floats,
		// a fully busy span came out a hair above its CPUs.
		{"fully busy box", at(470_614_529, 965_427_313, 5), at(470_614_529+280, 965_427_313+280, 5), 2, 0, false, "machine 2.00 of 2 CPUs busy"},
		{"idle box", at(10, 100, 5), at(10, 120, 5), 0, 0, false, "machine 0.00 of 2 CPUs busy, a thread waiting for a CPU 0 % of the time"},
		{"no pressure information", machineSample{cpus: 2, busy: 1, total: 10, waitedErr: noPSI}, machineSample{cpus: 2, busy: 6, total: 20, waitedErr: noPSI}, 1, -1, false, "CPU wait unknown: no CPU pressure"},
		{"wait capped at the span", at(10, 100, 0), at(20, 120, 11), 1, 1, false, "100 %"},
		{"unreadable", machineSample{err: errors.New("read the machine's CPU times: denied")}, at(1, 2, 0), 0, -1, true, ""},
		{"counters did not advance", at(10, 100, 0), at(10, 100, 0), 0, -1, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, missing := machineBetween(tc.a, tc.b, 10)
			if tc.missing {
				if m != nil || missing == "" {
					t.Fatalf("%+v, %q; want it missing", m, missing)
				}
				return
			}
			if m == nil {
				t.Fatalf("missing: %s", missing)
			}
			if m.CPUs != 2 || m.BusyCores < tc.busy-1e-9 || m.BusyCores > tc.busy+1e-9 || m.BusyCores > 2 {
				t.Errorf("%d CPUs, %v busy; want 2, %v", m.CPUs, m.BusyCores, tc.busy)
			}
			switch {
			case tc.wait < 0 && (m.CPUWait != nil || m.CPUWaitMissing == ""):
				t.Errorf("CPU wait %v (%q); want unknown", m.CPUWait, m.CPUWaitMissing)
			case tc.wait >= 0 && (m.CPUWait == nil || *m.CPUWait < tc.wait-1e-9 || *m.CPUWait > tc.wait+1e-9):
				t.Errorf("CPU wait %v; want %v", m.CPUWait, tc.wait)
			}
			if s := m.Sentence(); !strings.Contains(s, tc.sentence) {
				t.Errorf("sentence %q lacks %q", s, tc.sentence)
			}
		})
	}
}
