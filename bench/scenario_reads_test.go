package bench

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestReadMediansAgainstTheFloor(t *testing.T) {
	runs := []ReadRun{
		{Kind: ReadFloor, Answered: 10, ServerUsPerAnswer: 20}, {Kind: ReadCold, Answered: 10, ServerUsPerAnswer: 60},
		{Kind: ReadHot, Answered: 10, ServerUsPerAnswer: 100},
		{Kind: ReadFloor, Answered: 10, ServerUsPerAnswer: 30}, {Kind: ReadCold, Answered: 10, ServerUsPerAnswer: 90},
		{Kind: ReadHot, Answered: 10, ServerMissing: "scrape failed"},
		{Kind: ReadFloor, Answered: 10, ServerUsPerAnswer: 25}, {Kind: ReadCold, Answered: 10, ServerUsPerAnswer: 75},
		{Kind: ReadHot, Answered: 10, ServerUsPerAnswer: 150},
	}
	got := readMedians(runs)
	want := []struct {
		kind    string
		us, vs  float64
		counted int
	}{
		{ReadFloor, 25, 1, 3}, {ReadCold, 75, 3, 3}, {ReadHot, 125, 5, 3}, // the missing run is left out of the CPU median
	}
	if len(got) != len(want) {
		t.Fatalf("%d medians: %+v", len(got), got)
	}
	for i, w := range want {
		if g := got[i]; g.Kind != w.kind || g.ServerUsPerAnswer != w.us || g.VsFloor != w.vs || g.Runs != w.counted {
			t.Errorf("median %d: %+v, want %s %.0f µs ×%.0f over %d runs", i, g, w.kind, w.us, w.vs, w.counted)
		}
	}
}

func TestFloorBodyHasTheSizeAsked(t *testing.T) {
	for _, n := range []int{2, 5, 8, 9, 600} {
		b := floorBody(n)
		if len(b) != n || b[0] != '{' || strings.TrimSpace(string(b))[len(strings.TrimSpace(string(b)))-1] != '}' {
			t.Errorf("floorBody(%d) = %q (%d bytes)", n, b, len(b))
		}
	}
}
