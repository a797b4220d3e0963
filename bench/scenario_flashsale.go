package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"bidgate/auth"
	"bidgate/persist/redisstore"
)

// FlashSaleConfig is the design's scale: many cold auctions with a trickle
// of bids, and a few hot ones taking thousands of bids a second over their
// last minute, ending (and extended by anti-sniping) inside the run.
type FlashSaleConfig struct {
	Cold         int           `json:"cold"`
	Create       string        `json:"create"` // api, sql or "" (sql above 10,000 auctions)
	CreateConc   int           `json:"createConcurrency"`
	ColdRate     float64       `json:"coldRate"`     // bids/s over all cold auctions
	ColdEndShare float64       `json:"coldEndShare"` // share of cold auctions ending inside the run
	Hot          int           `json:"hot"`
	HotRate      float64       `json:"hotRate"` // bids/s per hot auction
	Duration     time.Duration `json:"duration"`
	ExtendWindow time.Duration `json:"extendWindow"` // 0: Duration/12, at least 1s
	ExtendBy     time.Duration `json:"extendBy"`     // 0: as ExtendWindow
	RetryShare   float64       `json:"retryShare"`   // requests sent again with the same key
	TimeoutShare float64       `json:"timeoutShare"` // of those, first sent with ShortTimeout
	ShortTimeout time.Duration `json:"shortTimeout"`
	RetryDelay   time.Duration `json:"retryDelay"` // retries wait up to this after the first answer
	LateBids     int           `json:"lateBids"`   // per hot auction, and over ended cold ones
	Bidders      int           `json:"bidders"`    // 0: enough for well under 1 bid/s each
}

// DefaultFlashSale is the design's scale.
func DefaultFlashSale() FlashSaleConfig {
	return FlashSaleConfig{Cold: 100_000, CreateConc: 64, ColdRate: 200, ColdEndShare: 0.01, Hot: 4, HotRate: 2000,
		Duration: 60 * time.Second, RetryShare: 0.05, TimeoutShare: 0.5, ShortTimeout: time.Millisecond,
		RetryDelay: 50 * time.Millisecond, LateBids: 20}
}

func (c *FlashSaleConfig) normalize() error {
	switch {
	case c.Cold < 0 || c.Hot < 0 || c.Cold+c.Hot == 0:
		return fmt.Errorf("flash-sale needs at least one auction (--cold, --hot)")
	case c.Duration < 2*time.Second:
		return fmt.Errorf("--duration must be at least 2s")
	case c.HotRate < 0 || c.ColdRate < 0:
		return fmt.Errorf("rates must not be negative")
	case c.RetryShare < 0 || c.RetryShare > 1 || c.TimeoutShare < 0 || c.TimeoutShare > 1 || c.ColdEndShare < 0 || c.ColdEndShare > 1:
		return fmt.Errorf("shares must be from 0 to 1")
	}
	if c.Create == "" {
		c.Create = "api"
		if c.Cold > 10_000 {
			c.Create = "sql"
		}
	}
	if c.Create != "api" && c.Create != "sql" {
		return fmt.Errorf("--create must be api or sql, got %q", c.Create)
	}
	if c.ExtendWindow <= 0 {
		c.ExtendWindow = max(time.Second, (c.Duration / 12).Round(time.Second))
	}
	if c.ExtendBy <= 0 {
		c.ExtendBy = c.ExtendWindow
	}
	c.ExtendWindow, c.ExtendBy = c.ExtendWindow.Round(time.Second), max(time.Second, c.ExtendBy.Round(time.Second))
	if c.CreateConc < 1 {
		c.CreateConc = 64
	}
	return nil
}

// FlashSale runs the flash-sale scenario and audits it.
func (e *Env) FlashSale(ctx context.Context, c FlashSaleConfig) (*Result, error) {
	if err := c.normalize(); err != nil {
		return nil, err
	}
	res := e.newResult("flash-sale", settingsOf(c))
	total := c.HotRate*float64(c.Hot) + c.ColdRate
	res.Bidders = c.Bidders
	if res.Bidders <= 0 {
		res.Bidders = max(20_000, int(math.Ceil(total*2)))
	}
	res.BidderRate = total / float64(res.Bidders)
	e.bidders.reset(res.Bidders)
	warm := time.Now()
	if err := e.tokens.Warm(e.bidders.base, res.Bidders, auth.ScopeBid); err != nil {
		return nil, err
	}
	e.notef("minted %d bidder tokens in %s", res.Bidders, time.Since(warm).Round(time.Millisecond))

	// Cold auctions: most end hours from now; ColdEndShare of them inside
	// the run, created last so their ends can be placed in it.
	inRun := int(math.Round(float64(c.Cold) * c.ColdEndShare))
	if c.ColdRate == 0 {
		inRun = 0
	}
	cold := &ColdLoad{Auctions: c.Cold, CreatedVia: c.Create, EndingInRun: inRun, Offered: c.ColdRate}
	res.Cold = cold
	e.notef("creating %d cold auctions (%s) and %d hot ones", c.Cold, c.Create, c.Hot)
	created := time.Now()
	far, err := e.createCold(ctx, c, c.Cold-inRun, time.Now().Add(time.Hour), time.Hour)
	if err != nil {
		return nil, err
	}
	// The load starts shortly after; hot auctions end at 3/4 of it so that
	// the last quarter runs on anti-sniping extensions.
	t0 := time.Now().Add(2 * time.Second)
	var hot []AuctionSpec
	for i := range c.Hot {
		s, err := e.api.createAuction(newAuction{SellerID: sellerID(i), Title: fmt.Sprintf("bidbench flash-sale hot #%d", i+1),
			StartPrice: cents(hotStartCents), MinIncrement: cents(incCents),
			EndTime: formatEnd(t0.Add(c.Duration * 3 / 4)), Hot: true,
			ExtendWindowSeconds: int64(c.ExtendWindow / time.Second), ExtendBySeconds: int64(c.ExtendBy / time.Second)})
		if err != nil {
			return nil, err
		}
		hot = append(hot, s)
	}
	soon, err := e.createCold(ctx, c, inRun, t0.Add(c.Duration/5), c.Duration*3/5)
	if err != nil {
		return nil, err
	}
	cold.CreateSeconds = time.Since(created).Seconds()
	if time.Now().After(t0) {
		res.note("creating the auctions overran the 2s lead: the first requests start late (their wait counts in latency)")
	}
	colds := append(far, soon...)
	specs := append(append([]AuctionSpec(nil), hot...), colds...)

	e.notef("load: %d hot auctions at %.0f bids/s, %.0f bids/s over %d cold ones, for %s; %d bidders",
		c.Hot, c.HotRate, c.ColdRate, len(colds), c.Duration, res.Bidders)
	res.LoadStart = t0
	bound := time.Until(t0) + c.Duration + c.ExtendBy + 2*e.opt.Loader.Timeout + time.Minute
	res.records = e.load(ctx, res, bound, func(ld *Loader) {
		var streams []Stream
		for _, h := range hot {
			streams = append(streams, e.hotStream(c, h, t0))
		}
		if len(colds) > 0 {
			streams = append(streams, e.coldStream(c, colds, t0))
		}
		// The CPU span starts just before the first bid is due (not through
		// the lead, idle) and ends before the late bids (their wait is idle).
		_ = sleepUntil(ctx, t0.Add(-50*time.Millisecond))
		cpu0 := e.cpu.sample(ctx)
		ld.Run(streams...)
		ld.Wait()
		cpu1 := e.cpu.sample(ctx)
		// Every answer is in and the late bids are not sent yet: nothing
		// writes the records while they are counted.
		recs := ld.rec.Records()
		cpu := cpuBetween(cpu0, cpu1, int64(len(recs)), decidedIn(recs))
		res.CPU = &cpu
		e.lateBids(ctx, ld, c, hot, soon)
	})
	res.Latency = Summarize(res.records, t0)

	secs := c.Duration.Seconds()
	for _, h := range hot {
		a := AuctionLoad{ID: h.ID, Offered: c.HotRate, OriginalEnd: h.OriginalEnd}
		a.Sent, a.Outcomes, a.LateSent, a.LateRefused = tally(res.records, func(r *Record) bool { return r.AuctionID == h.ID })
		a.AcceptedPerSec = float64(a.Outcomes[Created]) / secs
		a.FinalEnd, a.Extensions = endOf(h, res.records)
		res.Hot = append(res.Hot, a)
	}
	isHot := map[int64]bool{}
	for _, h := range hot {
		isHot[h.ID] = true
	}
	cold.Sent, cold.Outcomes, cold.LateSent, cold.LateRefused = tally(res.records, func(r *Record) bool { return !isHot[r.AuctionID] })
	cold.AcceptedPerSec = float64(cold.Outcomes[Created]) / secs

	if err := e.audit(ctx, res, specs); err != nil {
		return res, err
	}
	hotRate, coldRate := Rate{What: "hot: per auction (mean)"}, Rate{What: "cold: over all cold auctions"}
	for _, a := range res.Hot {
		hotRate.Accepted += a.AcceptedPerSec / float64(len(res.Hot))
		hotRate.Decided += float64(a.Outcomes[Created]+a.Outcomes[Conflict]) / secs / float64(len(res.Hot))
	}
	coldRate.Accepted = cold.AcceptedPerSec
	coldRate.Decided = float64(cold.Outcomes[Created]+cold.Outcomes[Conflict]) / secs
	if c.Hot == 0 {
		hotRate.What = ""
	}
	if len(colds) == 0 || c.ColdRate == 0 {
		coldRate.What = ""
	}
	e.limits(ctx, res, hotRate, coldRate)
	res.Finished = time.Now()
	return res, nil
}

// createCold creates n cold auctions through the API or in one SQL
// statement, ending from first (harness clock) over spread.
func (e *Env) createCold(ctx context.Context, c FlashSaleConfig, n int, first time.Time, spread time.Duration) ([]AuctionSpec, error) {
	if n <= 0 {
		return nil, nil
	}
	if c.Create == "sql" {
		// Place the ends on the database clock: the same offset from its now.
		now, err := e.dbNow(ctx)
		if err != nil {
			return nil, err
		}
		at := now.Add(time.Until(first))
		return e.createSQL(ctx, bulkAuctions{N: n, Title: "bidbench flash-sale cold", StartPrice: cents(coldStartCents),
			MinIncrement: cents(incCents), Every: 1, Early: at, EarlySpread: spread,
			ExtendWindow: c.ExtendWindow, ExtendBy: c.ExtendBy})
	}
	bar := func(planned, done func() int64) *progress {
		return startProgress(e.opt.Stderr, e.opt.Progress, "creating auctions", planned, done, nil)
	}
	return e.api.createMany(ctx, n, c.CreateConc, bar, func(i int) newAuction {
		offset := time.Duration(float64(spread) * float64(i) / float64(n))
		return newAuction{SellerID: sellerID(i), Title: fmt.Sprintf("bidbench flash-sale cold #%d", i+1),
			StartPrice: cents(coldStartCents), MinIncrement: cents(incCents), EndTime: formatEnd(first.Add(offset)),
			ExtendWindowSeconds: int64(c.ExtendWindow / time.Second), ExtendBySeconds: int64(c.ExtendBy / time.Second)}
	})
}

// retryPlan decides whether a job is sent again, and whether its first
// attempt times out on purpose.
func retryPlan(rng *rand.Rand, c FlashSaleConfig, j *Job) {
	if rng.Float64() >= c.RetryShare {
		return
	}
	j.RetryAfter = time.Millisecond + time.Duration(rng.Int64N(int64(max(c.RetryDelay, time.Millisecond))))
	if rng.Float64() < c.TimeoutShare {
		j.ShortTimeout = c.ShortTimeout
	}
}

// hotStream bids 1000.00 + 1.00·k as the k-th request on auction h: in
// order of intended time the amounts rise, so most are accepted and the
// ones overtaken on the way are refused as too low.
func (e *Env) hotStream(c FlashSaleConfig, h AuctionSpec, t0 time.Time) Stream {
	rng := e.rng()
	return Stream{Rate: c.HotRate, Count: int(c.HotRate * c.Duration.Seconds()), Start: t0,
		Make: func(i int, _ time.Time) (Job, bool) {
			j := Job{AuctionID: h.ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(hotStartCents + incCents*int64(i+1)), Kind: KindBid}
			retryPlan(rng, c, &j)
			return j, true
		}}
}

// coldStream spreads ColdRate bids/s over the cold auctions at random,
// each auction's k-th bid at 100.00 + 1.00·k.
func (e *Env) coldStream(c FlashSaleConfig, colds []AuctionSpec, t0 time.Time) Stream {
	rng := e.rng()
	counts := make([]int64, len(colds))
	return Stream{Rate: c.ColdRate, Count: int(c.ColdRate * c.Duration.Seconds()), Start: t0,
		Make: func(int, time.Time) (Job, bool) {
			a := rng.IntN(len(colds))
			counts[a]++
			j := Job{AuctionID: colds[a].ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(coldStartCents + incCents*counts[a]), Kind: KindBid}
			retryPlan(rng, c, &j)
			return j, true
		}}
}

// lateBids waits until the hot auctions and the cold ones that ended in the
// run are past their effective end (as their stores have it), then sends
// bids that must all be refused.
func (e *Env) lateBids(ctx context.Context, ld *Loader, c FlashSaleConfig, hot, soon []AuctionSpec) {
	if c.LateBids <= 0 {
		return
	}
	targets := append([]AuctionSpec(nil), hot...)
	targets = append(targets, soon[:min(len(soon), c.LateBids)]...)
	if len(targets) == 0 {
		return
	}
	var last time.Time
	now, err := e.dbNow(ctx)
	if err != nil {
		return
	}
	for _, s := range targets {
		end := s.OriginalEnd
		var pgEnd time.Time
		if err := e.db.QueryRow(ctx, `SELECT end_time FROM auction WHERE id = $1`, s.ID).Scan(&pgEnd); err == nil && pgEnd.After(end) {
			end = pgEnd
		}
		if s.Hot {
			if us, err := e.rdb.HGet(ctx, redisstore.KeysOf(s.ID).State, "end_us").Int64(); err == nil && time.UnixMicro(us).After(end) {
				end = time.UnixMicro(us)
			}
		}
		if end.After(last) {
			last = end
		}
	}
	// The ends are store times; wait on the harness clock by their offset
	// from the database's now, plus a margin.
	if err := sleepUntil(ctx, time.Now().Add(last.Sub(now)+500*time.Millisecond)); err != nil {
		return
	}
	n := 0
	for _, s := range targets {
		count := 1
		if s.Hot {
			count = c.LateBids
		}
		for k := range count {
			start := int64(coldStartCents)
			if s.Hot {
				start = hotStartCents
			}
			ld.Submit(Job{AuctionID: s.ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(start + incCents*int64(10_000_000+k)), Kind: KindLate, Intended: time.Now()})
			n++
		}
	}
	ld.Wait()
}
