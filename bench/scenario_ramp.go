package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/auth"
)

// RampConfig is hot-max and cold-max: one auction, the arrival rate raised
// by Factor every Step until a step's p99 crosses P99 or errors appear.
type RampConfig struct {
	StartRate float64       `json:"startRate"`
	Factor    float64       `json:"factor"`
	Step      time.Duration `json:"step"`
	MaxSteps  int           `json:"maxSteps"`
	MaxRate   float64       `json:"maxRate"`
	P99       time.Duration `json:"p99"`
	Bidders   int           `json:"bidders"` // 0: MaxRate/2, at least 20,000
	// Floor also sends the best step's rate (the last step's when none
	// held) to the floor server, for one step, after the audit (RampFloor).
	Floor bool `json:"floor"`
}

// DefaultHotMax starts at 1,000 bids/s.
func DefaultHotMax() RampConfig {
	return RampConfig{StartRate: 1000, Factor: 1.5, Step: 3 * time.Second, MaxSteps: 12, MaxRate: 100_000, P99: 200 * time.Millisecond}
}

// DefaultColdMax starts at 50 bids/s.
func DefaultColdMax() RampConfig {
	return RampConfig{StartRate: 50, Factor: 1.5, Step: 3 * time.Second, MaxSteps: 12, MaxRate: 20_000, P99: 200 * time.Millisecond}
}

// Ramp is the outcome of a ramp.
type Ramp struct {
	Hot       bool    `json:"hot"`
	AuctionID int64   `json:"auctionId"`
	Steps     []Step  `json:"steps"`
	Best      *Step   `json:"best,omitempty"` // the highest step that held
	Stop      string  `json:"stop"`           // why the ramp ended
	BestRate  float64 `json:"bestOfferedPerSecond"`
	P99Ms     float64 `json:"p99LimitMs"`
	// VsLimit is Best against the store's concurrent single-bid limit
	// measured in the same run (hot: "Redis bid script, 64 caller(s)").
	VsLimit *Ratio `json:"bestVsLimit,omitempty"`
	// Floor is the best step (or the last) against the HTTP floor (--floor).
	Floor *RampFloor `json:"floor,omitempty"`
}

// Step is one rate of a ramp.
type Step struct {
	N              int     `json:"n"`
	Offered        float64 `json:"offeredPerSecond"`
	Sent           int     `json:"sent"`
	Answered       int64   `json:"answered"` // any status, no transport error
	SentPerSec     float64 `json:"answeredPerSecond"`
	Created        int64   `json:"created"`
	Refused        int64   `json:"refused"` // 409
	AcceptedPerSec float64 `json:"acceptedPerSecond"`
	DecidedPerSec  float64 `json:"decidedPerSecond"` // 201 + 409
	Errors         int64   `json:"errors"`
	RateLimited    int64   `json:"rateLimited"`
	Latency        Latency `json:"latency"`
	SendLag        Latency `json:"sendLag"`
	CPU            CPU     `json:"cpu"`
	OK             bool    `json:"ok"`
	Reason         string  `json:"reason,omitempty"`
}

func (c *RampConfig) normalize() error {
	switch {
	case c.StartRate <= 0 || c.MaxRate < c.StartRate:
		return fmt.Errorf("--start-rate must be positive and at most --max-rate")
	case c.Factor <= 1:
		return fmt.Errorf("--factor must be above 1")
	case c.Step < 500*time.Millisecond:
		return fmt.Errorf("--step must be at least 500ms")
	case c.MaxSteps < 1:
		return fmt.Errorf("--max-steps must be at least 1")
	case c.P99 <= 0:
		return fmt.Errorf("--p99 must be positive")
	}
	return nil
}

// plannedBids is how many bids the ramp sends if every step holds.
func (c RampConfig) plannedBids() int {
	n, rate := 0, c.StartRate
	for step := 1; step <= c.MaxSteps && rate <= c.MaxRate; step++ {
		n += int(rate * c.Step.Seconds())
		rate *= c.Factor
	}
	return n
}

// HotMax ramps one hot auction.
func (e *Env) HotMax(ctx context.Context, c RampConfig) (*Result, error) {
	return e.ramp(ctx, "hot-max", true, c)
}

// ColdMax ramps one cold auction. bidgate promotes a cold auction that sees
// more than --promote-rate bids/s: run it with --promote-rate=-1 to measure
// the cold path; a promotion ends the ramp and is reported.
func (e *Env) ColdMax(ctx context.Context, c RampConfig) (*Result, error) {
	return e.ramp(ctx, "cold-max", false, c)
}

func (e *Env) ramp(ctx context.Context, name string, hot bool, c RampConfig) (*Result, error) {
	if err := c.normalize(); err != nil {
		return nil, err
	}
	res := e.newResult(name, settingsOf(c))
	res.Bidders = c.Bidders
	if res.Bidders <= 0 {
		res.Bidders = max(20_000, int(c.MaxRate/2))
	}
	e.bidders.reset(res.Bidders)
	// Minted up front, as the flash sale does: a signature in the load
	// would count in the steps' send lag and in bidbench's CPU per request.
	// Ids are handed out in turn, so the ramp uses at most one per bid.
	warm, need := time.Now(), min(res.Bidders, c.plannedBids())
	if err := e.tokens.Warm(e.bidders.base, need, auth.ScopeBid); err != nil {
		return nil, err
	}
	e.notef("minted %d bidder tokens in %s", need, time.Since(warm).Round(time.Millisecond))
	start := int64(coldStartCents)
	if hot {
		start = hotStartCents
	}
	// The auction outlives the longest ramp; no anti-sniping, so its end
	// stays put.
	longest := time.Duration(c.MaxSteps) * (c.Step + time.Second)
	spec, err := e.api.createAuction(newAuction{SellerID: sellerID(0), Title: "bidbench " + name, StartPrice: cents(start),
		MinIncrement: cents(incCents), EndTime: formatEnd(time.Now().Add(longest + time.Minute)), Hot: hot,
		ExtendWindowSeconds: 0, ExtendBySeconds: 1})
	if err != nil {
		return nil, err
	}
	ramp := &Ramp{Hot: hot, AuctionID: spec.ID, P99Ms: float64(c.P99) / float64(time.Millisecond)}
	res.Ramp = ramp
	e.notef("%s: auction %d, from %.0f bids/s ×%.2g every %s until p99 > %s or errors; %d bidders",
		name, spec.ID, c.StartRate, c.Factor, c.Step, c.P99, res.Bidders)

	var k int64 // the amounts rise across steps
	next := func() Job {
		k++
		return Job{AuctionID: spec.ID, Key: uuid.New(), BidderID: e.bidders.id(), Amount: cents(start + incCents*k), Kind: KindBid}
	}
	bound := time.Duration(c.MaxSteps)*(c.Step+e.opt.Loader.Timeout+2*time.Second) + time.Minute
	res.records = e.load(ctx, res, bound, func(ld *Loader) {
		rec := ld.rec
		rate := c.StartRate
		for n := 1; n <= c.MaxSteps && rate <= c.MaxRate && ld.ctx.Err() == nil; n++ {
			before := rec.Len()
			cpu0 := e.cpu.sample(ctx)
			t := time.Now().Add(100 * time.Millisecond)
			if n == 1 {
				res.LoadStart = t
			}
			ld.Run(Stream{Rate: rate, Count: int(rate * c.Step.Seconds()), Start: t,
				Make: func(int, time.Time) (Job, bool) {
					j := next()
					j.Step = n
					return j, true
				}})
			ld.Wait()
			cpu1 := e.cpu.sample(ctx)
			recs := rec.From(before)
			st := stepOf(n, rate, c, recs, t)
			st.CPU = cpuBetween(cpu0, cpu1, int64(len(recs)), st.Created+st.Refused)
			if !hot {
				var mode string
				if err := e.db.QueryRow(ctx, `SELECT mode FROM auction WHERE id = $1`, spec.ID).Scan(&mode); err == nil && mode == "HOT" {
					st.OK, st.Reason = false, "bidgate promoted the auction to hot (run bidgate with --promote-rate=-1 to measure the cold path)"
				}
			}
			ramp.Steps = append(ramp.Steps, st)
			if !st.OK {
				ramp.Stop = fmt.Sprintf("step %d at %.0f bids/s: %s", n, rate, st.Reason)
				break
			}
			best := st
			ramp.Best, ramp.BestRate = &best, rate
			rate *= c.Factor
		}
		if ramp.Stop == "" {
			ramp.Stop = fmt.Sprintf("reached the last step (--max-steps %d, --max-rate %.0f) without crossing the limit", c.MaxSteps, c.MaxRate)
		}
	})
	res.Latency = Summarize(res.records, res.LoadStart)
	if n := len(ramp.Steps); n > 0 {
		res.BidderRate = ramp.Steps[n-1].Offered / float64(res.Bidders) // at the top step
	}
	if ramp.Best == nil {
		res.note("no step held: " + ramp.Stop)
	}
	if err := e.audit(ctx, res, []AuctionSpec{spec}, nil, nil); err != nil {
		return res, err
	}
	if n := len(ramp.Steps); c.Floor && n > 0 {
		step := ramp.Steps[n-1]
		if ramp.Best != nil {
			step = *ramp.Best
		}
		ramp.Floor = e.rampFloor(ctx, c, step, next)
		if ramp.Floor.Missing != "" {
			res.note("--floor: " + ramp.Floor.Missing)
		}
	}
	best := Rate{What: name + ": best sustained step, one auction"}
	if ramp.Best != nil {
		best.Accepted, best.Decided = ramp.Best.AcceptedPerSec, ramp.Best.DecidedPerSec
	}
	store := "postgres"
	if hot {
		e.limits(ctx, res, best, Rate{})
		store = "redis"
	} else {
		e.limits(ctx, res, Rate{}, best)
	}
	ramp.VsLimit = concurrentRatio(res.Limits, res.Ratios, store)
	res.Finished = time.Now()
	return res, nil
}

// concurrentRatio is the ratio against store's limit with the most callers
// deciding one bid per call: the one bidgate's single auction is closest to.
func concurrentRatio(limits []Limit, ratios []Ratio, store string) *Ratio {
	var name string
	callers := 0
	for _, l := range limits {
		if l.Store == store && l.Batch == 1 && l.Callers > callers {
			name, callers = l.Name, l.Callers
		}
	}
	for i := range ratios {
		if ratios[i].Limit == name {
			r := ratios[i]
			return &r
		}
	}
	return nil
}

// stepOf judges one step.
func stepOf(n int, rate float64, c RampConfig, recs []Record, t time.Time) Step {
	sum := Summarize(recs, t)
	secs := c.Step.Seconds()
	if sum.Span > secs {
		secs = sum.Span
	}
	st := Step{N: n, Offered: rate, Sent: len(recs), Answered: int64(len(recs)) - sum.Count(Transport), SentPerSec: float64(len(recs)) / secs,
		Created: sum.Count(Created), Refused: sum.Count(Conflict), AcceptedPerSec: float64(sum.Count(Created)) / c.Step.Seconds(),
		DecidedPerSec: float64(sum.Count(Created)+sum.Count(Conflict)) / c.Step.Seconds(),
		Errors:        sum.Errors(), RateLimited: sum.Count(RateLimited), Latency: sum.All, SendLag: sum.SendLag, OK: true}
	limit := float64(c.P99) / float64(time.Millisecond)
	switch {
	case st.Errors > 0:
		st.OK, st.Reason = false, fmt.Sprintf("%d errors (5xx or transport)", st.Errors)
	case st.Latency.P99 > limit:
		st.OK, st.Reason = false, fmt.Sprintf("p99 %.1f ms > %.0f ms", st.Latency.P99, limit)
	}
	return st
}
