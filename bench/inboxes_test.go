package bench

import (
	"testing"
	"time"
)

// The listeners' audit: each stored notice of a connected listener must
// have been received; twice on one connection, or someone else's, fails.
func TestInboxesResult(t *testing.T) {
	stored := []NoticeRow{
		{ID: "outbid-1-2", UserID: 1, Type: "outbid"},
		{ID: "lost-1-1", UserID: 1, Type: "lost"},
		{ID: "won-1", UserID: 2, Type: "won"},
		{ID: "outbid-1-3", UserID: 3, Type: "outbid"}, // not a listener
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
	}{
		{"all delivered", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2", "lost-1-1")},
			{user: 2, ok: true, sessions: 2, got: got("won-1")},
		}, 3, 0, 3, 1},
		{"one missing", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2")},
			{user: 2, ok: true, sessions: 1, got: got("won-1")},
		}, 3, 1, 2, 0},
		{"a duplicate and a foreign notice", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2", "lost-1-1"), dups: []string{"lost-1-1"}, foreign: []string{"won-1"}},
			{user: 2, ok: true, sessions: 1, got: got("won-1")},
		}, 3, 2, 3, 0},
		{"a listener that never connected is not owed anything", []inboxLog{
			{user: 1, ok: true, sessions: 1, got: got("outbid-1-2", "lost-1-1")},
			{user: 2, got: got()},
		}, 2, 0, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &inboxes{logs: tc.logs}
			if n := b.expected(stored); n != tc.expected {
				t.Fatalf("expected %d, want %d", n, tc.expected)
			}
			r, c := b.result(stored)
			if r.Expected != tc.expected || r.Delivered != tc.delivered || r.Reconnects != tc.reconn || c.Failed != tc.failed || c.Pass != (tc.failed == 0) {
				t.Fatalf("result %+v, check failed %d (pass %v); want expected %d, delivered %d, reconnects %d, failed %d",
					r, c.Failed, c.Pass, tc.expected, tc.delivered, tc.reconn, tc.failed)
			}
			if tc.delivered > 0 && r.All.Count != int64(tc.delivered) {
				t.Fatalf("lag of %d notices, want %d", r.All.Count, tc.delivered)
			}
		})
	}
}
