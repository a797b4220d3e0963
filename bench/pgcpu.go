package bench

// pgCPUBetween is the postgres processes' CPU between two readings: a
// process in both counts its growth, one started in between all of its
// time; one that exited in between is lost, and counted as exited.
func pgCPUBetween(before, after map[int]float64) (seconds float64, processes, exited int) {
	for pid, s1 := range after {
		seconds += s1 - before[pid]
	}
	for pid := range before {
		if _, ok := after[pid]; !ok {
			exited++
		}
	}
	return seconds, len(after), exited
}
