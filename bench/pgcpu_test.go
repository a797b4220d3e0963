package bench

import "testing"

func TestPGCPUBetween(t *testing.T) {
	for _, tc := range []struct {
		name              string
		before, after     map[int]float64
		seconds           float64
		processes, exited int
	}{
		{"grown", map[int]float64{1: 1, 2: 2}, map[int]float64{1: 1.5, 2: 3}, 1.5, 2, 0},
		{"started during the run counts whole", map[int]float64{1: 1}, map[int]float64{1: 1, 3: 0.25}, 0.25, 2, 0},
		{"exited during the run is lost", map[int]float64{1: 1, 2: 5}, map[int]float64{1: 2}, 1, 1, 1},
	} {
		s, p, x := pgCPUBetween(tc.before, tc.after)
		if s != tc.seconds || p != tc.processes || x != tc.exited {
			t.Errorf("%s: %.2f s, %d processes, %d exited; want %.2f, %d, %d", tc.name, s, p, x, tc.seconds, tc.processes, tc.exited)
		}
	}
}

func TestPickBrowseKind(t *testing.T) {
	for _, tc := range []struct {
		u    float64
		want string
	}{
		{0, BrowseList}, {0.29, BrowseList}, {0.31, BrowseSearch}, {0.6, BrowseHistory},
		{0.8, BrowseMyBids}, {0.95, BrowseMyAuctions}, {0.999999, BrowseMyAuctions},
	} {
		if got := browseKinds[pickBrowseKind(tc.u)]; got != tc.want {
			t.Errorf("pickBrowseKind(%v) = %s, want %s", tc.u, got, tc.want)
		}
	}
}
