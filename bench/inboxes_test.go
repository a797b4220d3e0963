package bench

import (
	"testing"
	"time"
)

// The listeners' audit: each stored notice of a connected listener must
// have been received; twice on one connection, or someone else's, fails.
func TestInboxesResult(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC) // the measured load's
	stored := []NoticeRow{
		{ID: "outbid-1-2", UserID: 1, Type: "outbid", At: start.Add(-time.Second)}, // in the warm-up
		{ID: "lost-1-1", UserID: 1, Type: "lost", At: start.Add(time.Minute)},
		{ID: "won-1", UserID: 2, Type: "won", At: start.Add(time.Minute)},
		{ID: "outbid-1-3", UserID: 3, Type: "outbid", At: start}, // not a listener
	}
	got := func(ids ...string) map[string]time.Duration {
		m := map[string]time.Duration{}
		for _, id := range ids {
			m[id] = 100 * time.Millisecond
		}
		return m
	}
	for _, tc := range []struct {
		name              string
		logs              []inboxLog
		expected, failed  int
		delivered, reconn int
		lagged            int // delivered and caused from start on
	}{
		{"all delivered", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2", "lost-1-1")},
			{user: 2, ok: true, sessions: 2, got: got("won-1")},
		}, 3, 0, 3, 1, 2},
		{"one missing", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2")},
			{user: 2, ok: true, sessions: 1, got: got("won-1")},
		}, 3, 1, 2, 0, 1},
		{"a duplicate and a foreign notice", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2", "lost-1-1"), dups: []string{"lost-1-1"}, foreign: []string{"won-1"}},
			{user: 2, ok: true, sessions: 1, got: got("won-1")},
		}, 3, 2, 3, 0, 2},
		{"a listener that never connected is not owed anything", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2", "lost-1-1")},
			{user: 2, got: got()},
		}, 2, 0, 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &inboxes{logs: tc.logs}
			if n := b.expected(stored); n != tc.expected {
				t.Fatalf("expected %d, want %d", n, tc.expected)
			}
			r, c := b.result(stored, start)
			if r.Expected != tc.expected || r.Delivered != tc.delivered || r.Reconnects != tc.reconn || c.Failed != tc.failed || c.Pass != (tc.failed == 0) {
				t.Fatalf("result %+v, check failed %d (pass %v); want expected %d, delivered %d, reconnects %d, failed %d",
					r, c.Failed, c.Pass, tc.expected, tc.delivered, tc.reconn, tc.failed)
			}
			if r.All.Count != int64(tc.lagged) || r.WarmupLeftOut != tc.delivered-tc.lagged {
				t.Fatalf("lag of %d notices, %d left out as the warm-up's; want %d and %d", r.All.Count, r.WarmupLeftOut, tc.lagged, tc.delivered-tc.lagged)
			}
		})
	}
}
