// Package retry is the one back-off and loop that every background role of
// bidgate runs on (the bid relay, the persister, the reconciler, the outbox
// relay, the closer, the ring's join, the accept loop, the key reload, the
// update subscriber): a failing dependency is retried for ever with a
// growing, jittered wait, a wake-up never cuts a back-off short, and a
// streak of failures is logged once, then at most every LogEvery.
package retry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Defaults of a Backoff and of a Loop's logging.
const (
	DefaultMin      = 100 * time.Millisecond
	DefaultMax      = 5 * time.Second
	DefaultLogEvery = 30 * time.Second
)

// Backoff is the wait after consecutive failures: Min after the first,
// doubling up to Max, each randomized by ±25% so that many nodes retrying
// one dependency do not do it in step. The zero value uses the defaults.
type Backoff struct {
	Min, Max time.Duration
	exp      *backoff.ExponentialBackOff
}

// Next returns the wait after one more failure.
func (b *Backoff) Next() time.Duration {
	if b.exp == nil {
		b.exp = &backoff.ExponentialBackOff{
			InitialInterval: cmp(b.Min, DefaultMin), MaxInterval: cmp(b.Max, DefaultMax),
			RandomizationFactor: 0.25, Multiplier: 2,
		}
		b.exp.Reset()
	}
	return b.exp.NextBackOff()
}

// Reset starts over after a success.
func (b *Backoff) Reset() {
	if b.exp != nil {
		b.exp.Reset()
	}
}

// Wait sleeps the next back-off, or until ctx ends; it reports whether ctx
// is still live.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits d or until ctx ends, and reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func cmp(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

// Streak logs a run of failures of one task without flooding the log: the
// first failure at WARN, then one line per LogEvery with how many failed
// meanwhile, and one line when the task works again. It is safe for
// concurrent use.
type Streak struct {
	Task     string // what failed, for the log: "relay bids to Kafka"
	Log      *slog.Logger
	LogEvery time.Duration // default DefaultLogEvery

	mu         sync.Mutex
	failures   int
	since      time.Time
	lastLog    time.Time
	suppressed int
}

// Fail records one failure.
func (s *Streak) Fail(err error, attrs ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.failures++
	if s.failures == 1 {
		s.since = now
	}
	if s.failures > 1 && now.Sub(s.lastLog) < cmp(s.LogEvery, DefaultLogEvery) {
		s.suppressed++
		return
	}
	s.logger().Warn(s.Task+" failed; retrying", append(attrs, "err", err, "failures", s.failures,
		"failing_for", now.Sub(s.since).Round(time.Millisecond), "not_logged", s.suppressed)...)
	s.lastLog, s.suppressed = now, 0
}

// Succeed records a success, ending a streak.
func (s *Streak) Succeed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures > 0 {
		s.logger().Info(s.Task+" works again", "failures", s.failures,
			"failed_for", time.Since(s.since).Round(time.Millisecond))
	}
	s.failures, s.suppressed = 0, 0
}

func (s *Streak) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// ErrStop, wrapped in a pass's error, ends a Loop instead of a back-off.
var ErrStop = errors.New("stop")

// Loop runs a background task's passes until its context ends.
type Loop struct {
	Task     string        // for the log
	Interval time.Duration // wait after a pass that left nothing to do; default 1s
	// MaxInterval, when above Interval, lets an idle loop slow down: each
	// pass in a row that leaves nothing to do doubles the wait after it, up
	// to MaxInterval. A wake-up or a pass with work starts again from
	// Interval.
	MaxInterval time.Duration
	Wake        <-chan struct{}
	Backoff     Backoff
	Log         *slog.Logger
	LogEvery    time.Duration
	// OnError, when set, sees every failed pass (for a metric).
	OnError func(error)
	// Idle, when set, is how the loop waits after a pass that left nothing
	// to do, instead of Interval and Wake (a LISTEN for a notification, say).
	Idle func(ctx context.Context)
}

// Run calls pass until ctx ends, then returns. A pass that reports more
// work is followed by the next at once; one that did not waits Interval or
// a wake-up; one that failed waits its back-off, during which wake-ups are
// ignored (they stay pending, so the pass after the back-off sees them).
// A pass that failed but still reports more work (it did some: the
// closer's cold batch while Redis is down) is counted and logged as a
// failure and followed by the next at once, so the part that works is not
// slowed by the part that fails; the back-off is not reset.
//
// A pass error that wraps ErrStop ends the loop: Run returns it (a test's
// simulated crash, say). Run returns nil when ctx ends.
func (l *Loop) Run(ctx context.Context, pass func(ctx context.Context) (more bool, err error)) error {
	streak := &Streak{Task: l.Task, Log: l.Log, LogEvery: l.LogEvery}
	idle := newIdleWaits(cmp(l.Interval, time.Second), l.MaxInterval)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for ctx.Err() == nil {
		more, err := pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrStop) {
			return err
		}
		if err != nil {
			if l.OnError != nil {
				l.OnError(err)
			}
			streak.Fail(err)
			if more {
				continue
			}
			if !l.Backoff.Wait(ctx) {
				return nil
			}
			continue
		}
		streak.Succeed()
		l.Backoff.Reset()
		if more {
			idle.reset()
			continue
		}
		if l.Idle != nil {
			l.Idle(ctx)
			continue
		}
		timer.Reset(idle.next())
		select {
		case <-ctx.Done():
			return nil
		case <-l.Wake:
			idle.reset()
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
	return nil
}

// idleWaits are a Loop's waits after passes in a row that left nothing to
// do: the first, then each twice the one before, up to most.
type idleWaits struct{ first, most, wait time.Duration }

func newIdleWaits(first, most time.Duration) *idleWaits {
	return &idleWaits{first: first, most: max(first, most), wait: first}
}

// next returns the wait after one more idle pass.
func (w *idleWaits) next() time.Duration {
	d := w.wait
	w.wait = min(2*d, w.most)
	return d
}

// reset starts again from the first wait: there was work, or a wake-up.
func (w *idleWaits) reset() { w.wait = w.first }
