package persist_test

import (
	"testing"
	"time"

	"bidgate/persist"
)

// Re-feeds at one position back off: Refeed, then doubled each time, up to
// the cap, never overflowing.
func TestRefeedWaitBacksOff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, 5 * time.Second},
		{1, 10 * time.Second},
		{2, 20 * time.Second},
		{6, 320 * time.Second},
		{7, 10 * time.Minute},
		{63, 10 * time.Minute},
		{1000, 10 * time.Minute},
	} {
		if got := persist.RefeedWait(5*time.Second, 10*time.Minute, tc.n); got != tc.want {
			t.Errorf("after %d re-feeds: wait %v, want %v", tc.n, got, tc.want)
		}
	}
}
