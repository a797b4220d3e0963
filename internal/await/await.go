// Package await is the tests' one bounded wait for state that nothing
// announces (rows a background goroutine writes, a server's socket
// bookkeeping, another process coming up). Anything that announces itself
// is awaited directly instead; this only polls, or wakes on a channel the
// caller has, and fails naming what it waited for and what it last saw.
package await

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// poll is how often Until checks when it has no wake channel.
const poll = 5 * time.Millisecond

// Until checks cond, then again each time wake delivers (nil wake: every
// few milliseconds), until it reports ok, and returns the value it saw
// then. After limit it fails tb naming what was awaited and the last value
// seen.
func Until[T any](tb testing.TB, limit time.Duration, what string, wake <-chan struct{}, cond func() (T, bool)) T {
	tb.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	var tick <-chan time.Time
	if wake == nil {
		t := time.NewTicker(poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		seen, ok := cond()
		if ok {
			return seen
		}
		select {
		case <-wake:
		case <-tick:
		case <-deadline.C:
			if seen, ok = cond(); !ok {
				tb.Fatalf("gave up after %v waiting for %s; last seen: %v", limit, what, seen)
			}
			return seen
		}
	}
}

// NoError is Until for a condition that says why it does not hold yet.
func NoError(tb testing.TB, limit time.Duration, what string, cond func() error) {
	tb.Helper()
	Until(tb, limit, what, nil, func() (error, bool) {
		err := cond()
		return err, err == nil
	})
}

// Log is a slog.Handler that hands every record to the test, so that it can
// await what a background goroutine logs once its work is done. It never
// blocks the logger: records past its buffer are dropped.
type Log chan slog.Record

// NewLog returns a Log with room for the few lines a test awaits.
func NewLog() Log { return make(Log, 64) }

func (l Log) Enabled(context.Context, slog.Level) bool { return true }

func (l Log) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Clone():
	default:
	}
	return nil
}

func (l Log) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l Log) WithGroup(string) slog.Handler      { return l }

// Message returns the first record logged with msg, failing tb after limit.
func (l Log) Message(tb testing.TB, msg string, limit time.Duration) slog.Record {
	tb.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case r := <-l:
			if r.Message == msg {
				return r
			}
		case <-timer.C:
			tb.Fatalf("%q not logged within %v", msg, limit)
			return slog.Record{}
		}
	}
}
