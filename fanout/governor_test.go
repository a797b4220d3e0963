package fanout

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"bidgate/internal/await"
)

// The interval doubles while the scheduler's latency is past the
// threshold, up to the maximum, holds in between, and shrinks back to the
// base once the latency is under half the threshold.
func TestGovernorAdjusts(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name  string
		p99s  []time.Duration
		wants []time.Duration
	}{
		{"idle stays at the base", []time.Duration{0, ms, 5 * ms}, []time.Duration{150 * ms, 150 * ms, 150 * ms}},
		{"overload doubles up to the maximum", []time.Duration{40 * ms, 40 * ms, 40 * ms, 40 * ms, 40 * ms},
			[]time.Duration{300 * ms, 600 * ms, 1200 * ms, 2000 * ms, 2000 * ms}},
		{"between half and the threshold holds", []time.Duration{40 * ms, 15 * ms, 15 * ms}, []time.Duration{300 * ms, 300 * ms, 300 * ms}},
		{"recovery shrinks to the base", []time.Duration{40 * ms, 40 * ms, 0, 0, 0, 0},
			[]time.Duration{300 * ms, 600 * ms, 400 * ms, 266666666, 177777777, 150 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics(nil)
			g := newGovernor(Config{Interval: 150 * ms, MaxInterval: 2 * time.Second, OverloadLatency: 20 * ms}, m)
			for i, p := range tc.p99s {
				g.adjust(p)
				if got := g.current(); got != tc.wants[i] {
					t.Fatalf("after p99 %v (step %d): interval %v, want %v", p, i, got, tc.wants[i])
				}
				if got := testutil.ToFloat64(m.interval); got != tc.wants[i].Seconds() {
					t.Fatalf("step %d: gauge %v, want %v", i, got, tc.wants[i].Seconds())
				}
			}
		})
	}
}

// Under real CPU starvation (more busy goroutines than CPUs) the governor
// sees the scheduler's latency rise and stretches the interval; once the
// load is gone it returns to the base.
func TestGovernorFollowsRealOverload(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	g := newGovernor(Config{Interval: 150 * time.Millisecond, MaxInterval: 2 * time.Second, OverloadLatency: 20 * time.Millisecond}, m)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	var stop atomic.Bool
	var spinners sync.WaitGroup
	for range 8 * runtime.GOMAXPROCS(0) {
		spinners.Add(1)
		go func() {
			defer spinners.Done()
			for n := 0; !stop.Load(); n++ {
				_ = n * n // CPU only: the scheduler preempts it every 10 ms
			}
		}()
	}
	await.Until(t, time.Minute, "the interval stretched under load", nil, func() (time.Duration, bool) {
		return g.current(), g.current() > 150*time.Millisecond
	})
	if testutil.ToFloat64(m.stretches) < 1 {
		t.Fatal("stretched without counting it")
	}
	stop.Store(true)
	spinners.Wait()
	await.Until(t, time.Minute, "the interval back at the base once the load is gone", nil, func() (time.Duration, bool) {
		return g.current(), g.current() == 150*time.Millisecond
	})
}

// A governor whose maximum is the base never stretches.
func TestGovernorOff(t *testing.T) {
	g := newGovernor(Config{Interval: time.Second, MaxInterval: time.Second, OverloadLatency: time.Millisecond}, newMetrics(nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.run(ctx) // returns at once
	g.adjust(time.Hour)
	if g.current() != time.Second {
		t.Fatalf("interval %v, want 1s", g.current())
	}
}
