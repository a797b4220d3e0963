package main

import (
	"slices"
	"testing"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int // nil: refused
	}{
		{"1,3", []int{1, 3}},
		{" 3 ", []int{3}},
		{"1,2,3", []int{1, 2, 3}},
		{"0", nil},
		{"10", nil},
		{"1,,3", nil},
		{"one", nil},
	} {
		got, err := parseSizes(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("parseSizes(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
