package fanout

import (
	"context"
	"math"
	runtimemetrics "runtime/metrics"
	"sync/atomic"
	"time"
)

// governorPeriod is how often the governor reads the scheduler's latency
// and adjusts the interval.
const governorPeriod = 250 * time.Millisecond

// schedLatencies is the runtime's histogram of how long runnable goroutines
// waited for a CPU.
const schedLatencies = "/sched/latencies:seconds"

// governor makes the viewers give way first when the node runs out of CPU.
// A bid waiting for a CPU waits as long as any runnable goroutine does, so
// the Go scheduler's latency is the overload signal: while its p99 over the
// last period is past Config.OverloadLatency, the coalescing interval of
// every room doubles, up to Config.MaxInterval; once it is under half of
// that, the interval shrinks back to Config.Interval. Viewers then get
// fewer, newer states (each message says the interval it was sent under),
// and the write work per viewer, the fan-out's whole cost, falls with it.
type governor struct {
	base, max, threshold time.Duration
	metrics              *metrics

	interval atomic.Int64 // the current interval, in nanoseconds

	sample []runtimemetrics.Sample
	prev   []uint64 // the histogram's counts at the last reading
}

func newGovernor(cfg Config, m *metrics) *governor {
	g := &governor{base: cfg.Interval, max: max(cfg.MaxInterval, cfg.Interval), threshold: cfg.OverloadLatency,
		metrics: m, sample: []runtimemetrics.Sample{{Name: schedLatencies}}}
	g.set(cfg.Interval)
	return g
}

// current is the interval rooms flush at now.
func (g *governor) current() time.Duration { return time.Duration(g.interval.Load()) }

func (g *governor) set(d time.Duration) {
	g.interval.Store(int64(d))
	g.metrics.interval.Set(d.Seconds())
}

// run adjusts the interval every governorPeriod until ctx ends. A node
// whose MaxInterval is its Interval never stretches.
func (g *governor) run(ctx context.Context) {
	if g.max == g.base {
		return
	}
	t := time.NewTicker(governorPeriod)
	defer t.Stop()
	g.p99() // the baseline
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.adjust(g.p99())
		}
	}
}

// adjust sets the next interval from the last period's scheduler latency.
func (g *governor) adjust(p99 time.Duration) {
	g.metrics.schedLatency.Set(p99.Seconds())
	cur := g.current()
	switch {
	case p99 > g.threshold && cur < g.max:
		g.set(min(2*cur, g.max))
		g.metrics.stretches.Inc()
	case p99 < g.threshold/2 && cur > g.base:
		g.set(max(cur*2/3, g.base))
	}
}

// p99 is the 99th percentile of the scheduler latencies since the last
// call (the upper bound of its bucket); zero when nothing was scheduled.
func (g *governor) p99() time.Duration {
	runtimemetrics.Read(g.sample)
	if g.sample[0].Value.Kind() != runtimemetrics.KindFloat64Histogram {
		return 0 // not on this runtime: never overloaded
	}
	h := g.sample[0].Value.Float64Histogram()
	if len(g.prev) != len(h.Counts) {
		g.prev = make([]uint64, len(h.Counts))
	}
	var total uint64
	delta := make([]uint64, len(h.Counts))
	for i, c := range h.Counts {
		delta[i] = c - g.prev[i]
		total += delta[i]
	}
	copy(g.prev, h.Counts)
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(0.99 * float64(total)))
	var seen uint64
	for i, c := range delta {
		seen += c
		if seen >= want {
			upper := h.Buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = h.Buckets[i]
			}
			return time.Duration(upper * float64(time.Second))
		}
	}
	return 0
}
