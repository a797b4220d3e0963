package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/auth"
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
	// Warmup runs the same load for this long before Duration, on the same
	// auctions: its requests are audited like the others but left out of
	// the latency, rates and CPU, which then describe a node in its steady
	// state rather than one still growing its heap and its connections.
	Warmup       time.Duration `json:"warmup"`
	ExtendWindow time.Duration `json:"extendWindow"` // 0: Duration/12, at least 1s
	ExtendBy     time.Duration `json:"extendBy"`     // 0: as ExtendWindow
	RetryShare   float64       `json:"retryShare"`   // requests sent again with the same key
	TimeoutShare float64       `json:"timeoutShare"` // of those, first sent with ShortTimeout
	ShortTimeout time.Duration `json:"shortTimeout"`
	RetryDelay   time.Duration `json:"retryDelay"` // retries wait up to this after the first answer
	LateBids     int           `json:"lateBids"`   // per hot auction, and over ended cold ones
	Bidders      int           `json:"bidders"`    // 0: enough for well under 1 bid/s each
	// The auction rules' mix (docs/api.md "Auction rules").
	ProxyShare   float64 `json:"proxyShare"`   // bids sent as a proxy bid (maxAmount) rather than a straight amount
	RepeatShare  float64 `json:"repeatShare"`  // bids by the bidder of the auction's latest proxy bid, often its leader
	ReserveShare float64 `json:"reserveShare"` // cold auctions with a hidden reserve (and every other hot one)
	BuyNowShare  float64 `json:"buyNowShare"`  // cold auctions with a buy-now price (and every other hot one)
	BuyNows      int     `json:"buyNows"`      // buy-now requests on cold auctions at the start (and one bought hot auction)
	// Watching the hot auctions: WebSocket viewers, connected before the
	// load at ViewerConnectRate a second, ViewersPerSource to a loopback
	// source address; and Pollers GET /auctions/{id} a second over the load.
	Viewers           int     `json:"viewers"`
	ViewerConnectRate float64 `json:"viewerConnectRate"`
	ViewersPerSource  int     `json:"viewersPerSource"`
	Pollers           float64 `json:"pollers"`
	// Inboxes of the bidders (the first ones) connect to GET /ws/me
	// before the load, at ViewerConnectRate, ViewersPerSource to a source
	// address: the audit checks they got their notices live.
	Inboxes int `json:"inboxes"`
	// Floor sends, after the audit, the load's request rate for as long
	// to a do-nothing fasthttp server (the HTTP floor) and reports
	// bidgate's CPU over the load as a multiple of the floor's.
	Floor bool `json:"floor"`
}

// DefaultFlashSale is the design's scale.
func DefaultFlashSale() FlashSaleConfig {
	return FlashSaleConfig{Cold: 100_000, CreateConc: 64, ColdRate: 200, ColdEndShare: 0.01, Hot: 4, HotRate: 2000,
		Duration: 60 * time.Second, Warmup: 10 * time.Second, RetryShare: 0.05, TimeoutShare: 0.5, ShortTimeout: time.Millisecond,
		RetryDelay: 50 * time.Millisecond, LateBids: 20,
		ProxyShare: 1.0 / 3, RepeatShare: 0.05, ReserveShare: 0.2, BuyNowShare: 0.1, BuyNows: 20,
		ViewerConnectRate: 300, ViewersPerSource: 200}
}

func (c *FlashSaleConfig) normalize() error {
	switch {
	case c.Cold < 0 || c.Hot < 0 || c.Cold+c.Hot == 0:
		return fmt.Errorf("flash-sale needs at least one auction (--cold, --hot)")
	case c.Duration < 2*time.Second:
		return fmt.Errorf("--duration must be at least 2s")
	case c.Warmup < 0:
		return fmt.Errorf("--warmup must not be negative")
	case c.HotRate < 0 || c.ColdRate < 0:
		return fmt.Errorf("rates must not be negative")
	case !shares(c.RetryShare, c.TimeoutShare, c.ColdEndShare, c.ProxyShare, c.RepeatShare, c.ReserveShare, c.BuyNowShare):
		return fmt.Errorf("shares must be from 0 to 1")
	case c.BuyNows < 0:
		return fmt.Errorf("buy-now requests must not be negative")
	case c.Viewers < 0 || c.Pollers < 0 || c.ViewersPerSource < 0 || c.Inboxes < 0:
		return fmt.Errorf("--viewers, --pollers, --viewers-per-source and --inboxes must not be negative")
	case c.Viewers+c.Inboxes > 0 && c.ViewerConnectRate <= 0:
		return fmt.Errorf("--viewer-connect-rate must be positive")
	case (c.Viewers > 0 || c.Pollers > 0) && c.Hot == 0:
		return fmt.Errorf("--viewers and --pollers watch the hot auctions: give --hot")
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

// shares reports whether every share is from 0 to 1.
func shares(s ...float64) bool {
	for _, x := range s {
		if x < 0 || x > 1 {
			return false
		}
	}
	return true
}

// Amounts of the flash sale's reserves and buy-now prices, in cents.
const (
	coldReserveCents = coldStartCents + 6*incCents  // met by a third straight bid, or a proxy reaching it
	coldBuyNowCents  = coldStartCents + 50*incCents // well above where a cold auction's bids go
	hotBuyNowCents   = hotStartCents + 50*incCents
)

// every is how often an auction gets a feature it has with the given
// share: every n-th (0: never).
func every(share float64) int {
	if share <= 0 {
		return 0
	}
	return max(1, int(math.Round(1/share)))
}

// FlashSale runs the flash-sale scenario and audits it.
func (e *Env) FlashSale(ctx context.Context, c FlashSaleConfig) (*Result, error) {
	return e.flashSale(ctx, c, nil)
}

// flashSale is FlashSale telling loadAt (when not nil) when its load
// starts, once that is known, so that another load can run beside it.
func (e *Env) flashSale(ctx context.Context, c FlashSaleConfig, loadAt func(time.Time)) (*Result, error) {
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
	// The load starts shortly after (and after the viewers connect), with
	// the warm-up; the measured part (t0 on) is Duration, and hot auctions
	// end at 3/4 of it so that its last quarter runs on anti-sniping
	// extensions. The streams send the warm-up's bids too.
	warm0 := time.Now().Add(2*time.Second + connectTime(c))
	t0 := warm0.Add(c.Warmup)
	load := c
	load.Duration += c.Warmup
	hot, bought, err := e.createHot(c, t0, hotBids(load))
	if err != nil {
		return nil, err
	}
	soon, err := e.createCold(ctx, c, inRun, t0.Add(c.Duration/5), c.Duration*3/5)
	if err != nil {
		return nil, err
	}
	cold.CreateSeconds = time.Since(created).Seconds()
	if time.Now().After(warm0) {
		res.note("creating the auctions overran the 2s lead: the first requests start late (their wait counts in latency)")
	}
	w := e.watchHot(ctx, res, c, hot)
	if w != nil && time.Now().After(warm0) {
		res.note("connecting the viewers overran the lead: the first requests start late (their wait counts in latency)")
	}
	var ib *inboxes
	if c.Inboxes > 0 {
		e.notef("connecting %d bidders to /ws/me at %.0f/s", min(c.Inboxes, res.Bidders), c.ViewerConnectRate)
		ib = e.startInboxes(ctx, e.listenerIDs(min(c.Inboxes, res.Bidders)), c.ViewerConnectRate, c.ViewersPerSource)
		if time.Now().After(warm0) {
			res.note("connecting the notice listeners overran the lead: the first requests start late (their wait counts in latency)")
		}
	}
	colds := append(far, soon...)
	specs := slices.Concat(hot, bought, colds)

	if c.Warmup > 0 {
		e.notef("warm-up: the same load for %s, left out of latency, rates and CPU", c.Warmup)
	}
	e.notef("load: %d hot auctions at %.0f bids/s, %.0f bids/s over %d cold ones, for %s; %d bidders",
		c.Hot, c.HotRate, c.ColdRate, len(colds), c.Duration, res.Bidders)
	res.LoadStart = t0
	if loadAt != nil {
		loadAt(t0)
	}
	bound := time.Until(t0) + c.Duration + c.ExtendBy + 2*e.opt.Loader.Timeout + time.Minute
	res.records = e.load(ctx, res, bound, func(ld *Loader) {
		var streams []Stream
		for _, h := range hot {
			streams = append(streams, e.hotStream(load, h, warm0))
		}
		if len(colds) > 0 {
			streams = append(streams, e.coldStream(load, colds, warm0))
		}
		streams = append(streams, e.buyNowStreams(c, bought, soon, far, t0)...)
		// The CPU span starts just before the first measured bid is due
		// (not through the lead, idle, nor the warm-up) and ends before the
		// late bids (their wait is idle).
		type sample struct {
			cpu  cpuSample
			msgs int64
		}
		started := make(chan sample, 1)
		go func() {
			_ = sleepUntil(ctx, t0.Add(-50*time.Millisecond))
			started <- sample{e.cpu.sample(ctx), w.messages()}
		}()
		polled := make(chan *PollersResult, 1)
		if c.Pollers > 0 {
			go func() { polled <- e.poll(ctx, c.Pollers, t0, c.Duration, ids(hot)) }()
		} else {
			polled <- nil
		}
		ld.Run(streams...)
		ld.Wait()
		res.Pollers = <-polled
		s0 := <-started
		cpu1, msgs1 := e.cpu.sample(ctx), w.messages()
		// Every answer is in and the late bids are not sent yet: nothing
		// writes the records while they are counted.
		_, recs := splitAt(ld.rec.Records(), t0)
		cpu := cpuBetween(s0.cpu, cpu1, int64(len(recs)), decidedIn(recs))
		res.CPU = &cpu
		w.chargeCPU(cpu, msgs1-s0.msgs)
		e.lateBids(ctx, ld, c, hot, soon)
	})
	warmRecs, measured := splitAt(res.records, t0)
	if c.Warmup > 0 {
		s := Summarize(warmRecs, warm0)
		res.Warmup = &s
	}
	res.Latency = Summarize(measured, t0)

	secs := c.Duration.Seconds()
	for _, h := range hot {
		a := AuctionLoad{ID: h.ID, Offered: c.HotRate, OriginalEnd: h.OriginalEnd}
		a.Sent, a.Outcomes, a.LateSent, a.LateRefused = tally(measured, func(r *Record) bool { return r.AuctionID == h.ID })
		a.AcceptedPerSec = float64(a.Outcomes[Created]) / secs
		a.FinalEnd, a.Extensions = endOf(h, res.records)
		res.Hot = append(res.Hot, a)
	}
	isHot := map[int64]bool{}
	for _, h := range slices.Concat(hot, bought) {
		isHot[h.ID] = true
	}
	cold.Sent, cold.Outcomes, cold.LateSent, cold.LateRefused = tally(measured, func(r *Record) bool { return !isHot[r.AuctionID] })
	cold.AcceptedPerSec = float64(cold.Outcomes[Created]) / secs

	if err := e.audit(ctx, res, specs, w, ib); err != nil {
		return res, err
	}
	if c.Floor && res.CPU != nil && len(specs) > 0 {
		res.Floor = e.flashSaleFloor(ctx, c, res.CPU, specs[0].ID)
		if res.Floor.Missing != "" {
			res.note("--floor: " + res.Floor.Missing)
		}
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
			ExtendWindow: c.ExtendWindow, ExtendBy: c.ExtendBy,
			ReserveEvery: every(c.ReserveShare), Reserve: cents(coldReserveCents),
			BuyNowEvery: every(c.BuyNowShare), BuyNow: cents(coldBuyNowCents)})
	}
	reserves, buyNows := every(c.ReserveShare), every(c.BuyNowShare)
	bar := func(planned, done func() int64) *progress {
		return startProgress(e.opt.Stderr, e.opt.Progress, "creating auctions", planned, done, nil)
	}
	return e.api.createMany(ctx, n, c.CreateConc, bar, func(i int) newAuction {
		offset := time.Duration(float64(spread) * float64(i) / float64(n))
		a := newAuction{SellerID: sellerID(i), Title: fmt.Sprintf("bidbench flash-sale cold #%d", i+1),
			StartPrice: cents(coldStartCents), MinIncrement: cents(incCents), EndTime: formatEnd(first.Add(offset)),
			ExtendWindowSeconds: int64(c.ExtendWindow / time.Second), ExtendBySeconds: int64(c.ExtendBy / time.Second)}
		// As bulkSQL numbers them (from 1).
		if reserves > 0 && (i+1)%reserves == 1%reserves {
			a.ReservePrice = cents(coldReserveCents)
		}
		if buyNows > 0 && (i+1)%buyNows == 0 {
			a.BuyNowPrice = cents(coldBuyNowCents)
		}
		return a
	})
}

// createHot creates the hot auctions, ending at 3/4 of the measured load
// (from t0), for streams of n bids each: every other one (the second, fourth, ...) with a reserve halfway up its bids,
// the others with a buy-now price that a buy-now request in mid-load finds
// unavailable (bids are in). With BuyNows, one more hot auction (bought)
// is bought at the start of the load.
func (e *Env) createHot(c FlashSaleConfig, t0 time.Time, n int64) (hot, bought []AuctionSpec, err error) {
	end := formatEnd(t0.Add(c.Duration * 3 / 4))
	for i := range c.Hot {
		a := newAuction{SellerID: sellerID(i), Title: fmt.Sprintf("bidbench flash-sale hot #%d", i+1),
			StartPrice: cents(hotStartCents), MinIncrement: cents(incCents), EndTime: end, Hot: true,
			ExtendWindowSeconds: int64(c.ExtendWindow / time.Second), ExtendBySeconds: int64(c.ExtendBy / time.Second)}
		switch {
		case i%2 == 1 && c.ReserveShare > 0:
			a.ReservePrice = cents(hotStartCents + incCents*n)
		case i%2 == 0 && c.BuyNowShare > 0:
			a.BuyNowPrice = cents(hotStartCents + 4*incCents*n + 50*incCents) // out of the bids' reach
		}
		s, err := e.api.createAuction(a)
		if err != nil {
			return nil, nil, err
		}
		hot = append(hot, s)
	}
	if c.Hot == 0 || c.BuyNows == 0 {
		return hot, nil, nil
	}
	s, err := e.api.createAuction(newAuction{SellerID: sellerID(c.Hot), Title: "bidbench flash-sale hot, bought",
		StartPrice: cents(hotStartCents), MinIncrement: cents(incCents), EndTime: end, Hot: true,
		ExtendWindowSeconds: int64(c.ExtendWindow / time.Second), ExtendBySeconds: int64(c.ExtendBy / time.Second),
		ReservePrice: cents(hotStartCents + 10*incCents), BuyNowPrice: cents(hotBuyNowCents)})
	if err != nil {
		return nil, nil, err
	}
	return hot, []AuctionSpec{s}, nil
}

// hotBids is how many requests each hot auction's stream sends over c's
// Duration.
func hotBids(c FlashSaleConfig) int64 { return int64(c.HotRate * c.Duration.Seconds()) }

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

// auctionDraw is what a stream remembers of one auction to draw its next
// bid.
type auctionDraw struct {
	n         int64 // bids drawn so far
	lastProxy int64 // bidder of the latest proxy bid drawn (0: none yet)
	lastMax   int64 // their highest maximum, cents
}

// draw fills j's bidder and terms with the auction's next bid: its k-th
// at start + 2·inc·k (two increments apart: a bid the leader's proxy
// answers leaves the price at V + inc, and the next one still clears it),
// so that in order of intended time most bids are accepted and the ones
// overtaken on the way are refused as too low. ProxyShare of them are
// proxy bids with a maximum up to 15 increments above that, which the
// following bids run into (automatic bids, ties). RepeatShare come from
// the bidder of the auction's latest proxy bid, who often leads still: a
// straight bid is then refused (already_leading), a maximum not above
// theirs too (max_not_raised), a higher one raises it.
func (d *auctionDraw) draw(rng *rand.Rand, c FlashSaleConfig, start int64, next func() int64, j *Job) {
	d.n++
	v := start + 2*incCents*d.n
	proxy := rng.Float64() < c.ProxyShare
	if d.lastProxy != 0 && rng.Float64() < c.RepeatShare {
		j.BidderID = d.lastProxy
		proxy = rng.IntN(3) > 0
		if proxy {
			v = max(v, d.lastMax+incCents*(rng.Int64N(6)-2)) // two increments under their maximum to three above
		}
	} else {
		j.BidderID = next()
	}
	if !proxy {
		j.Amount = cents(v)
		return
	}
	if j.BidderID != d.lastProxy {
		v += incCents * rng.Int64N(16)
		d.lastMax = 0
	}
	j.MaxAmount = cents(v)
	d.lastProxy, d.lastMax = j.BidderID, max(d.lastMax, v)
}

// hotStream draws the bids of hot auction h (auctionDraw.draw, from
// 1000.00). An auction with a buy-now price gets a buy-now request in
// mid-load instead of one bid: bids are in by then, so it is refused
// (buy_now_unavailable).
func (e *Env) hotStream(c FlashSaleConfig, h AuctionSpec, t0 time.Time) Stream {
	rng := e.rng()
	n := hotBids(c)
	var d auctionDraw
	return Stream{Rate: c.HotRate, Count: int(n), Start: t0,
		Make: func(i int, _ time.Time) (Job, bool) {
			j := Job{AuctionID: h.ID, Key: uuid.New(), Kind: KindBid}
			if h.BuyNowPrice != "" && int64(i) == n/2 {
				j.BuyNow, j.BidderID = true, e.bidders.id()
			} else {
				d.draw(rng, c, hotStartCents, e.bidders.id, &j)
			}
			retryPlan(rng, c, &j)
			return j, true
		}}
}

// coldStream spreads ColdRate bids/s over the cold auctions at random,
// each auction's bids drawn by auctionDraw.draw from 100.00.
func (e *Env) coldStream(c FlashSaleConfig, colds []AuctionSpec, t0 time.Time) Stream {
	rng := e.rng()
	draws := make([]auctionDraw, len(colds))
	return Stream{Rate: c.ColdRate, Count: int(c.ColdRate * c.Duration.Seconds()), Start: t0,
		Make: func(int, time.Time) (Job, bool) {
			a := rng.IntN(len(colds))
			j := Job{AuctionID: colds[a].ID, Key: uuid.New(), Kind: KindBid}
			draws[a].draw(rng, c, coldStartCents, e.bidders.id, &j)
			retryPlan(rng, c, &j)
			return j, true
		}}
}

// buyNowStreams are the buy-now requests of the load's first second: on
// the bought hot auction, a buy-now and then three bids (refused: it is
// closed); and on up to BuyNows cold auctions with a buy-now price (those
// ending in the run first), one each, racing the bids the cold stream
// sends them (whichever is first wins: a buy-now after a bid is refused).
func (e *Env) buyNowStreams(c FlashSaleConfig, bought, soon, far []AuctionSpec, t0 time.Time) []Stream {
	var streams []Stream
	for _, h := range bought {
		jobs := []Job{{AuctionID: h.ID, Key: uuid.New(), BidderID: e.bidders.id(), BuyNow: true, Kind: KindBid}}
		for k := range int64(3) {
			jobs = append(jobs, Job{AuctionID: h.ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(hotBuyNowCents + incCents*(k+1)), Kind: KindBid})
		}
		streams = append(streams, e.jobStream(c, 4, t0, jobs))
	}
	var jobs []Job
	for _, s := range slices.Concat(soon, far) {
		if len(jobs) == c.BuyNows {
			break
		}
		if s.BuyNowPrice != "" {
			jobs = append(jobs, Job{AuctionID: s.ID, Key: uuid.New(), BidderID: e.bidders.id(), BuyNow: true, Kind: KindBid})
		}
	}
	if len(jobs) > 0 {
		streams = append(streams, e.jobStream(c, max(20, float64(len(jobs))), t0, jobs))
	}
	return streams
}

// jobStream sends jobs in order at rate per second from start, each
// retried as retryPlan decides.
func (e *Env) jobStream(c FlashSaleConfig, rate float64, start time.Time, jobs []Job) Stream {
	rng := e.rng()
	return Stream{Rate: rate, Count: len(jobs), Start: start, Make: func(i int, _ time.Time) (Job, bool) {
		j := jobs[i]
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
			// Above any price the load reaches: only the end refuses it.
			ld.Submit(Job{AuctionID: s.ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(start + incCents*int64(1_000_000_000+k)), Kind: KindLate, Intended: time.Now()})
			n++
		}
	}
	ld.Wait()
}

// splitAt splits records into those intended before t and the others,
// each in the order given.
func splitAt(recs []Record, t time.Time) (before, from []Record) {
	for _, r := range recs {
		if r.Intended.Before(t) {
			before = append(before, r)
		} else {
			from = append(from, r)
		}
	}
	return before, from
}
