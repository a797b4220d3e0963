//go:build linux

package bench

import "testing"

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       float64
		err        bool
	}{
		{"plain", "4242 (bidbench) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 130 0 0 20 0 9 0 100 0 0", 3.8, false},
		{"name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 0 0", 0.03, false},
		{"truncated", "7 (x) R 1 7", 0, true},
		{"no name", "garbage", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 a 2 0", 0, true},
	} {
		got, err := parseProcStat(tc.line)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("%s: %v, %v; want %v (error: %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
