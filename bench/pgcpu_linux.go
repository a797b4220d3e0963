//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// postgresCPU is the CPU seconds of every process whose command is
// postgres (the postmaster, its backends and workers), by pid, from
// /proc/<pid>/stat: a PostgreSQL on this machine only.
func postgresCPU() (map[int]float64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := map[int]float64{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		secs, err := parseProcStat(s)
		if err != nil {
			return nil, err
		}
		out[pid] = secs
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process named postgres on this machine")
	}
	return out, nil
}
