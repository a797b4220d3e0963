//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc/<pid>/stat's times: fixed at 100 a second
// in Linux's user ABI (sysconf(_SC_CLK_TCK)), whatever the kernel's HZ.
const userHZ = 100

// procCPUSeconds is process pid's user + system CPU time, all its threads,
// from /proc/<pid>/stat (where a node's process_cpu_seconds_total comes
// from too, at the same 10 ms resolution).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU of process %d: %w", pid, err)
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name before them, in parentheses,
// may hold spaces and parentheses itself.
func parseProcStat(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %.60q: no command name", s)
	}
	f := strings.Fields(s[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %.60q: too few fields", s)
	}
	var ticks uint64
	for _, v := range f[11:13] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: CPU time %q: %w", v, err)
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}
