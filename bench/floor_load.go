package bench

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// floorBidBodyBytes is the floor's answer to a bid: about the size of
// bidgate's 201 (a bid with its row, the auction's price and leader).
const floorBidBodyBytes = 420

// FloorLoad is a load of bids sent to the floor server: the same bids,
// tokens and generator as bidgate got, answered by a do-nothing fasthttp
// handler in a process of its own.
type FloorLoad struct {
	Offered   float64 `json:"offeredPerSecond"`
	BodyBytes int     `json:"bodyBytes"`
	Sent      int     `json:"sent"`
	Answered  int     `json:"answered"` // any status, no transport error
	Latency   Latency `json:"latency"`
	// UsPerAnswer is the floor process's CPU per answer.
	UsPerAnswer float64 `json:"floorUsPerAnswer"`
	Missing     string  `json:"missing,omitempty"` // why a figure is 0
}

// floorLoad sends rate bids/s for d, each made by next, to a floor server
// of its own, and measures its CPU per answer. The result is named so that
// a failure to stop the server still reaches Missing.
func (e *Env) floorLoad(ctx context.Context, rate float64, d time.Duration, next func() Job) (f FloorLoad) {
	f = FloorLoad{Offered: rate, BodyBytes: floorBidBodyBytes}
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
	load := e.runSteady(ctx, []Target{floor.target}, rate, d, floor.sample, next)
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
	default:
		f.UsPerAnswer = cpu.Server.Seconds * 1e6 / float64(f.Answered)
	}
	return f
}

// RampFloor is a ramp's best rate (the last step's when none held) sent to
// the floor server (--floor); bidgate's CPU per answer at that step is
// measured against it.
type RampFloor struct {
	Step int  `json:"step"` // the ramp's step it repeats
	Held bool `json:"held"` // that step held (the best one)
	FloorLoad
	// BidgateUsPerAnswer is the nodes' CPU per answer at the step, VsFloor
	// it over the floor's.
	BidgateUsPerAnswer float64 `json:"bidgateUsPerAnswer"`
	VsFloor            float64 `json:"vsFloor"`
}

// rampFloor sends step's rate, for one step, to a floor server of its own;
// next makes each bid as the ramp does.
func (e *Env) rampFloor(ctx context.Context, c RampConfig, step Step, next func() Job) *RampFloor {
	f := &RampFloor{Step: step.N, Held: step.OK, FloorLoad: e.floorLoad(ctx, step.Offered, c.Step, next)}
	switch {
	case f.Missing != "":
	case step.CPU.Server == nil || step.Answered == 0:
		f.Missing = "bidgate's CPU at the step: " + step.CPU.ServerMissing
	default:
		f.BidgateUsPerAnswer = step.CPU.Server.Seconds * 1e6 / float64(step.Answered)
		f.VsFloor = f.BidgateUsPerAnswer / f.UsPerAnswer
	}
	return f
}

// FlashSaleFloor is a flash sale's request rate over the load sent to the
// floor server for as long (--floor): bidgate's CPU per request and per
// decided bid over the load as multiples of the floor's per answer at the
// same rate, on the same box and generator; what the HTTP exchange alone
// would cost of a bid.
type FlashSaleFloor struct {
	FloorLoad
	BidgateUsPerRequest float64 `json:"bidgateUsPerRequest"`
	BidgateUsPerDecided float64 `json:"bidgateUsPerDecidedBid"`
	RequestVsFloor      float64 `json:"requestVsFloor"`
	DecidedVsFloor      float64 `json:"decidedVsFloor"`
}

// flashSaleFloor sends the load's request rate to a floor server for the
// load's duration: bids of the flash sale's bidders on one auction.
func (e *Env) flashSaleFloor(ctx context.Context, c FlashSaleConfig, cpu *CPU, auctionID int64) *FlashSaleFloor {
	rate := float64(cpu.Requests) / c.Duration.Seconds()
	var k int64
	next := func() Job {
		k++
		return Job{AuctionID: auctionID, Key: uuid.New(), BidderID: e.bidders.id(), Amount: cents(100_00 + k), Kind: KindBid}
	}
	f := &FlashSaleFloor{FloorLoad: e.floorLoad(ctx, rate, c.Duration, next)}
	switch {
	case f.Missing != "":
	case cpu.Server == nil:
		f.Missing = "bidgate's CPU over the load: " + cpu.ServerMissing
	default:
		f.BidgateUsPerRequest, f.BidgateUsPerDecided = cpu.Server.UsPerRequest, cpu.Server.UsPerDecided
		f.RequestVsFloor, f.DecidedVsFloor = f.BidgateUsPerRequest/f.UsPerAnswer, f.BidgateUsPerDecided/f.UsPerAnswer
	}
	return f
}
