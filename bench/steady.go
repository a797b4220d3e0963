package bench

import (
	"context"
	"time"
)

// steadyRun is one open-loop run at a fixed rate: a reads run, a ramp's
// floor step.
type steadyRun struct {
	recs          []Record
	start         time.Time
	before, after cpuSample // sample's, just before the first send and after the last answer
}

// runSteady sends next's jobs to targets at rate for d, starting 100 ms
// from now, and samples the CPU counters around them.
func (e *Env) runSteady(ctx context.Context, targets []Target, rate float64, d time.Duration,
	sample func(context.Context) cpuSample, next func() Job) steadyRun {
	lctx, cancel := context.WithTimeout(ctx, d+2*e.opt.Loader.Timeout+10*time.Second)
	defer cancel()
	rec := &Recorder{}
	ld := NewLoader(lctx, targets, e.opt.Loader, rec, e.tokens)
	start := time.Now().Add(100 * time.Millisecond)
	_ = sleepUntil(ctx, start.Add(-10*time.Millisecond))
	before := sample(ctx)
	ld.Run(Stream{Rate: rate, Count: int(rate * d.Seconds()), Start: start,
		Make: func(int, time.Time) (Job, bool) { return next(), true }})
	ld.Wait()
	after := sample(ctx)
	ld.Close()
	return steadyRun{recs: rec.Records(), start: start, before: before, after: after}
}
