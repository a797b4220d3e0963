package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// CloseBurstConfig is many auctions ending in the same second.
type CloseBurstConfig struct {
	Auctions int           `json:"auctions"`
	Lead     time.Duration `json:"lead"`     // how far ahead (database clock) the common second is
	BidShare float64       `json:"bidShare"` // share of auctions that get one bid first
	BidRate  float64       `json:"bidRate"`
	LateBids int           `json:"lateBids"`
	Timeout  time.Duration `json:"timeout"` // bound on waiting for all to close
	Bidders  int           `json:"bidders"`
}

// DefaultCloseBurst is 10,000 auctions.
func DefaultCloseBurst() CloseBurstConfig {
	return CloseBurstConfig{Auctions: 10_000, Lead: 5 * time.Second, BidShare: 0.1, BidRate: 1000, LateBids: 20, Timeout: 60 * time.Second}
}

// CloseBurst is what the closer did with the burst.
type CloseBurst struct {
	Auctions    int       `json:"auctions"`
	Bids        int       `json:"bids"`
	FirstEnd    time.Time `json:"firstEnd"` // database time
	LastEnd     time.Time `json:"lastEnd"`
	Closed      int       `json:"closed"`
	FirstClosed time.Time `json:"firstClosed"`
	LastClosed  time.Time `json:"lastClosed"`
	// AfterFirstEnd and AfterLastEnd are the seconds from the first and
	// the last end until the last auction was CLOSED (closed_at, database
	// clock). ClosePerSec is closed / (last closed_at - first closed_at).
	AfterFirstEnd float64      `json:"allClosedAfterFirstEndSeconds"`
	AfterLastEnd  float64      `json:"allClosedAfterLastEndSeconds"`
	ClosePerSec   float64      `json:"closedPerSecond"`
	TimedOut      bool         `json:"timedOut"`
	Timeline      []ClosePoint `json:"timeline"`
	// NodeCPUPerCloseUs is the nodes' CPU from the first bid until the
	// last auction was CLOSED (the bids' included), per auction closed.
	NodeCPUPerCloseUs float64 `json:"nodeCpuUsPerClose,omitempty"`
}

// ClosePoint is one poll: seconds since the first end, auctions CLOSED.
type ClosePoint struct {
	T      float64 `json:"t"`
	Closed int     `json:"closed"`
}

// CloseBurstRun creates the auctions, bids on some, and measures how long
// the closer takes; the audit checks each was closed exactly once.
func (e *Env) CloseBurstRun(ctx context.Context, c CloseBurstConfig) (*Result, error) {
	switch {
	case c.Auctions < 1:
		return nil, fmt.Errorf("--auctions must be positive")
	case c.Lead < 2*time.Second:
		return nil, fmt.Errorf("--lead must be at least 2s")
	case c.BidShare < 0 || c.BidShare > 1:
		return nil, fmt.Errorf("--bid-share must be from 0 to 1")
	case c.Timeout <= 0:
		return nil, fmt.Errorf("--close-timeout must be positive")
	}
	res := e.newResult("close-burst", settingsOf(c))
	res.Bidders = c.Bidders
	if res.Bidders <= 0 {
		res.Bidders = max(20_000, c.Auctions)
	}
	res.BidderRate = c.BidRate / float64(res.Bidders)
	e.bidders.reset(res.Bidders)

	var first time.Time
	if err := e.db.QueryRow(ctx, `SELECT date_trunc('second', clock_timestamp()) + $1::bigint * INTERVAL '1 second'`,
		int64(c.Lead/time.Second)).Scan(&first); err != nil {
		return nil, err
	}
	dbNow, err := e.dbNow(ctx)
	if err != nil {
		return nil, err
	}
	offset := time.Since(dbNow) // harness clock minus database clock
	e.notef("close-burst: %d auctions ending in the second from %s (database clock)", c.Auctions, first.Format(time.RFC3339))
	specs, err := e.createSQL(ctx, bulkAuctions{N: c.Auctions, Title: "bidbench close-burst", StartPrice: cents(coldStartCents),
		MinIncrement: cents(incCents), Every: 1, Early: first, EarlySpread: time.Second, ExtendWindow: 0, ExtendBy: time.Second})
	if err != nil {
		return nil, err
	}
	burst := &CloseBurst{Auctions: len(specs), FirstEnd: first}
	for _, s := range specs {
		if s.OriginalEnd.After(burst.LastEnd) {
			burst.LastEnd = s.OriginalEnd
		}
	}
	res.CloseBurst = burst

	// One bid each on a share of them, done a second before the end.
	rng := e.rng()
	perm := rng.Perm(len(specs))
	bidStart := time.Now().Add(100 * time.Millisecond)
	room := first.Add(offset).Add(-time.Second).Sub(bidStart).Seconds()
	bids := min(int(float64(len(specs))*c.BidShare+0.5), int(c.BidRate*max(0, room)))
	burst.Bids = bids
	res.LoadStart = bidStart

	cpu0 := e.cpu.sample(ctx)
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		e.pollClosed(ctx, burst, ids(specs), first.Add(offset).Add(-200*time.Millisecond), burst.LastEnd.Add(offset).Add(c.Timeout))
	}()
	bound := c.Lead + 2*time.Second + 2*e.opt.Loader.Timeout + time.Minute
	res.records = e.load(ctx, res, bound, func(ld *Loader) {
		ld.Run(Stream{Rate: c.BidRate, Count: bids, Start: bidStart, Make: func(i int, _ time.Time) (Job, bool) {
			return Job{AuctionID: specs[perm[i]].ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(coldStartCents + incCents), Kind: KindBid}, true
		}})
		ld.Wait()
		if c.LateBids <= 0 {
			return
		}
		if sleepUntil(ctx, burst.LastEnd.Add(offset).Add(500*time.Millisecond)) != nil {
			return
		}
		for i := range min(c.LateBids, len(specs)) {
			ld.Submit(Job{AuctionID: specs[perm[len(perm)-1-i]].ID, Key: uuid.New(), BidderID: e.bidders.id(),
				Amount: cents(coldStartCents + 1000*incCents), Kind: KindLate, Intended: time.Now()})
		}
		ld.Wait()
	})
	<-pollDone
	cpu := cpuBetween(cpu0, e.cpu.sample(ctx), int64(len(res.records)), decidedIn(res.records))
	res.CPU = &cpu
	res.Latency = Summarize(res.records, bidStart)

	var minClosed, maxClosed *time.Time
	if err := e.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'CLOSED'), min(closed_at), max(closed_at)
	  FROM auction WHERE id = ANY($1)`, ids(specs)).Scan(&burst.Closed, &minClosed, &maxClosed); err != nil {
		return res, err
	}
	if minClosed != nil && maxClosed != nil {
		burst.FirstClosed, burst.LastClosed = *minClosed, *maxClosed
		burst.AfterFirstEnd = maxClosed.Sub(first).Seconds()
		burst.AfterLastEnd = maxClosed.Sub(burst.LastEnd).Seconds()
		if d := maxClosed.Sub(*minClosed).Seconds(); d > 0 {
			burst.ClosePerSec = float64(burst.Closed) / d
		}
	}
	if cpu.Server != nil && burst.Closed > 0 {
		burst.NodeCPUPerCloseUs = cpu.Server.Seconds * 1e6 / float64(burst.Closed)
	}
	all := Check{ID: "all-closed", Invariant: 3, Name: fmt.Sprintf("close-burst: all %d auctions CLOSED within %s of the last end", len(specs), c.Timeout),
		Checked: len(specs), Failed: len(specs) - burst.Closed}
	if all.Failed > 0 {
		all.Examples = []string{fmt.Sprintf("%d of %d still OPEN", all.Failed, len(specs))}
	}
	res.Checks = append(res.Checks, all.done())
	if err := e.audit(ctx, res, specs, nil, nil); err != nil {
		return res, err
	}
	res.note("close-burst measures the closer: the stores' bid limits do not apply and are not measured")
	res.Finished = time.Now()
	return res, nil
}

// pollClosed counts CLOSED auctions every 50ms from `from` until all are
// closed or `until` (harness clock).
func (e *Env) pollClosed(ctx context.Context, b *CloseBurst, all []int64, from, until time.Time) {
	if sleepUntil(ctx, from) != nil {
		return
	}
	for {
		var closed int
		var now time.Time
		if err := e.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'CLOSED'), clock_timestamp() FROM auction WHERE id = ANY($1)`,
			all).Scan(&closed, &now); err != nil {
			return
		}
		b.Timeline = append(b.Timeline, ClosePoint{T: now.Sub(b.FirstEnd).Seconds(), Closed: closed})
		if closed == len(all) {
			return
		}
		if time.Now().After(until) {
			b.TimedOut = true
			return
		}
		if sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) != nil {
			return
		}
	}
}
