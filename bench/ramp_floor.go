package bench

import "context"

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
	load := e.runSteady(ctx, []Target{floor.target}, step.Offered, c.Step, floor.sample, next)
	f.Sent, f.Latency = len(load.recs), Summarize(load.recs, load.start).All
	for i := range load.recs {
		if load.recs[i].Outcome != Transport {
			f.Answered++
		}
	}
	cpu := cpuBetween(load.before, load.after, int64(f.Sent), 0)
	switch {
	case cpu.Server == nil:
		f.Missing = "floor CPU: " + cpu.ServerMissing
	case f.Answered == 0:
		f.Missing = "the floor answered nothing"
	case step.CPU.Server == nil || step.Answered == 0:
		f.Missing = "bidgate's CPU at the step: " + step.CPU.ServerMissing
	default:
		f.UsPerAnswer = cpu.Server.Seconds * 1e6 / float64(f.Answered)
		f.BidgateUsPerAnswer = step.CPU.Server.Seconds * 1e6 / float64(step.Answered)
		f.VsFloor = f.BidgateUsPerAnswer / f.UsPerAnswer
	}
	return f
}
