package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A failing pass is retried after its back-off however often the loop is
// woken meanwhile: a dependency that is down is not hammered because bids
// keep arriving.
func TestLoopWakeDoesNotCutBackoff(t *testing.T) {
	const window, min = 500 * time.Millisecond, 50 * time.Millisecond
	for range 3 {
		wake := make(chan struct{}, 1)
		ctx, cancel := context.WithTimeout(context.Background(), window)
		go func() {
			for ctx.Err() == nil {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}()
		var passes atomic.Int64
		l := Loop{Task: "test", Wake: wake, Backoff: Backoff{Min: min, Max: min}, Log: quiet}
		l.Run(ctx, func(context.Context) (bool, error) {
			passes.Add(1)
			return false, errors.New("down")
		})
		cancel()
		// At most one pass per shortest back-off (min less its 25% jitter).
		if most := int64(window/(min*3/4)) + 1; passes.Load() > most {
			t.Fatalf("%d passes in %v with a %v back-off, want at most %d", passes.Load(), window, min, most)
		}
	}
}

// After a pass that worked and found nothing more, a wake-up starts the
// next pass at once, without waiting the interval.
func TestLoopWakesAfterSuccess(t *testing.T) {
	wake := make(chan struct{}, 1)
	passed := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := Loop{Task: "test", Interval: time.Hour, Wake: wake, Log: quiet}
		n := 0
		l.Run(ctx, func(context.Context) (bool, error) {
			n++
			passed <- n
			return false, nil
		})
	}()
	for want := 1; want <= 3; want++ {
		if got := <-passed; got != want {
			t.Fatalf("pass %d, want %d", got, want)
		}
		if want < 3 {
			wake <- struct{}{}
		}
	}
	cancel()
	<-done
}

// More work runs the next pass at once; failures log once per streak.
func TestLoopMoreAndBackoffReset(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := []error{errors.New("a"), errors.New("b"), nil, nil}
	var passes int
	l := Loop{Task: "test", Interval: time.Hour, Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond}, Log: quiet}
	l.Run(ctx, func(context.Context) (bool, error) {
		i := passes
		passes++
		if i == len(results)-1 {
			cancel()
		}
		return i < len(results)-1, results[i]
	})
	if passes != len(results) {
		t.Fatalf("%d passes, want %d", passes, len(results))
	}
}

// A pass that failed in part but did some work runs again at once: the
// part that works (the closer's cold batch) is not slowed by the part that
// fails (its hot batch while Redis is down). The failure is still counted.
// With an hour's back-off, any wait would end the test by its deadline.
func TestLoopMoreDespiteFailureSkipsBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		more bool
		err  error
	}
	results := []result{{true, errors.New("hot batch down")}, {true, errors.New("hot batch down")}, {false, nil}}
	var passes, failures int
	l := Loop{Task: "test", Interval: time.Hour, Backoff: Backoff{Min: time.Hour, Max: time.Hour}, Log: quiet,
		OnError: func(error) { failures++ }}
	err := l.Run(ctx, func(context.Context) (bool, error) {
		r := results[passes]
		passes++
		if passes == len(results) {
			cancel()
		}
		return r.more, r.err
	})
	if err != nil {
		t.Fatal(err)
	}
	if passes != len(results) || failures != 2 {
		t.Fatalf("%d passes and %d failures counted before the deadline, want %d and 2", passes, failures, len(results))
	}
}

// The waits after idle passes in a row double from Interval up to
// MaxInterval, and start again from Interval after work or a wake-up.
func TestIdleWaits(t *testing.T) {
	const ms = time.Millisecond
	cases := []struct {
		name        string
		first, most time.Duration
		steps       string // n: one more idle pass; r: work or a wake-up
		want        []time.Duration
	}{
		{"no MaxInterval: always Interval", 20 * ms, 0, "nnn", []time.Duration{20 * ms, 20 * ms, 20 * ms}},
		{"MaxInterval below Interval: always Interval", 20 * ms, 5 * ms, "nn", []time.Duration{20 * ms, 20 * ms}},
		{"doubles up to MaxInterval", 20 * ms, 100 * ms, "nnnnn", []time.Duration{20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms}},
		{"work starts again", 20 * ms, time.Second, "nnnrnn", []time.Duration{20 * ms, 40 * ms, 80 * ms, 20 * ms, 40 * ms}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newIdleWaits(c.first, c.most)
			var got []time.Duration
			for _, s := range c.steps {
				if s == 'r' {
					w.reset()
				} else {
					got = append(got, w.next())
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("waits %v, want %v", got, c.want)
			}
		})
	}
}

// An idle loop with MaxInterval slows down: in a window where a steady
// 1 ms interval would make hundreds of passes, doubling waits make a few.
// (TestLoopWakesAfterSuccess shows a wake-up cuts a wait short.)
func TestLoopIdleSlowsDown(t *testing.T) {
	const window = 300 * time.Millisecond
	passes := make(chan struct{}, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := Loop{Task: "test", Interval: time.Millisecond, MaxInterval: time.Hour, Log: quiet}
		l.Run(ctx, func(context.Context) (bool, error) {
			passes <- struct{}{}
			return false, nil
		})
	}()
	<-passes
	time.Sleep(window) // the window whose passes are counted
	cancel()
	<-done
	// 1+2+4+...+256 ms exceed the window: at most 9 more passes.
	if n := len(passes); n > 9 {
		t.Fatalf("%d idle passes in %v after the first, want at most 9", n, window)
	}
}
