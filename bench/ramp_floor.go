package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// floorBidBodyBytes is the floor's answer to a bid: about the size of
// bidgate's 201 (a bid with its row, the auction's price and leader).
const floorBidBodyBytes = 420

// RampFloor is a ramp's best rate (the last step's when none held) sent to
// the floor server (--floor): the same bids, tokens and generator,
// answered by a do-nothing fasthttp handler in a process of its own.
// bidgate's CPU per answer at that step is measured against it.
type RampFloor struct {
	Step      int     `json:"step"` // the ramp's step it repeats
	Held      bool    `json:"held"` // that step held (the best one)
	Offered   float64 `json:"offeredPerSecond"`
	BodyBytes int     `json:"bodyBytes"`
	Sent      int     `json:"sent"`
	Answered  int     `json:"answered"` // any status, no transport error
	Latency   Latency `json:"latency"`
	// UsPerAnswer is the floor process's CPU per answer; BidgateUsPerAnswer
	// the nodes' at the best step; VsFloor the second over the first.
	UsPerAnswer        float64 `json:"floorUsPerAnswer"`
	BidgateUsPerAnswer float64 `json:"bidgateUsPerAnswer"`
	VsFloor            float64 `json:"vsFloor"`
	Missing            string  `json:"missing,omitempty"` // why a figure is 0
}

// rampFloor sends step's rate, for one step, to a floor server of its own;
// next makes each bid as the ramp does.
func (e *Env) rampFloor(ctx context.Context, c RampConfig, step Step, next func() Job) *RampFloor {
	f := &RampFloor{Step: step.N, Held: step.OK, Offered: step.Offered, BodyBytes: floorBidBodyBytes}
	floor, err := startFloor(ctx, f.BodyBytes)
	if err != nil {
		f.Missing = err.Error()
		return f
	}
	defer func() {
		if err := floor.stop(); err != nil && f.Missing == "" {
			f.Missing = err.Error()
		}
	}()
	lctx, cancel := context.WithTimeout(ctx, c.Step+2*e.opt.Loader.Timeout+10*time.Second)
	defer cancel()
	rec := &Recorder{}
	ld := NewLoader(lctx, []Target{floor.target}, e.opt.Loader, rec, e.tokens)
	start := time.Now().Add(100 * time.Millisecond)
	_ = sleepUntil(ctx, start.Add(-10*time.Millisecond))
	cpu0, err0 := floor.cpuSeconds()
	ld.Run(Stream{Rate: step.Offered, Count: int(step.Offered * c.Step.Seconds()), Start: start,
		Make: func(int, time.Time) (Job, bool) { return next(), true }})
	ld.Wait()
	cpu1, err1 := floor.cpuSeconds()
	ld.Close()
	recs := rec.Records()
	f.Sent, f.Latency = len(recs), Summarize(recs, start).All
	for i := range recs {
		if recs[i].Outcome != Transport {
			f.Answered++
		}
	}
	switch {
	case err0 != nil || err1 != nil:
		f.Missing = fmt.Sprintf("floor CPU: %v", errors.Join(err0, err1))
	case f.Answered == 0:
		f.Missing = "the floor answered nothing"
	case step.CPU.Server == nil || step.Answered == 0:
		f.Missing = "bidgate's CPU at the step: " + step.CPU.ServerMissing
	default:
		f.UsPerAnswer = (cpu1 - cpu0) * 1e6 / float64(f.Answered)
		f.BidgateUsPerAnswer = step.CPU.Server.Seconds * 1e6 / float64(step.Answered)
		f.VsFloor = f.BidgateUsPerAnswer / f.UsPerAnswer
	}
	return f
}
