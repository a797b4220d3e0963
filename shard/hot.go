package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"bidgate"
	"bidgate/internal/batch"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// hot serializes bids of hot auctions in Redis: a bid is handed once, to
// its lane's batcher, whose goroutine decides the waiting bids of each
// auction in one script call (which also publishes the new state, and on a
// single Redis server takes the bidders' tokens first). On a single server
// every hot auction shares one lane, so that the calls of all of them go
// in one round trip; on a Cluster each auction is a lane of its own.
type hot struct {
	rs      *redisstore.Store
	db      pgstore.Querier
	batches *batch.Batchers[int64, hotRequest, hotOutcome]
	cache   *priceCache
	limiter *limiter
	metrics *metrics

	onAccepted func(auctionID int64) // may be nil
}

type hotRequest struct {
	bidgate.BidRequest
	// limited: the bidder's token was taken already (a cold bid that found
	// its auction turned hot).
	limited bool
}

type hotOutcome struct {
	res bidgate.BidResult
	err error // the bid's own answer: too low, closed, reused key, rate limited
}

func (h *hot) placeBid(ctx context.Context, r bidgate.BidRequest, limited bool) (bidgate.BidResult, error) {
	lane := r.AuctionID
	if h.rs.Together() {
		lane = 0 // one lane for all
	}
	o, err := h.batches.Do(ctx, lane, hotRequest{BidRequest: r, limited: limited})
	if err != nil {
		return bidgate.BidResult{}, err
	}
	return o.res, o.err
}

// runBatch is the batcher's call for the waiting bids of one lane: the
// bidders' token buckets, then one script call per auction for the bids
// they allow, all in one round trip where the lane is shared. An auction
// Redis lacks is loaded from PostgreSQL and tried again. On a single
// Redis server the scripts take the tokens themselves.
func (h *hot) runBatch(ctx context.Context, _ int64, reqs []hotRequest) ([]hotOutcome, error) {
	out := make([]hotOutcome, len(reqs))
	together := !h.limiter.off() && h.rs.Together()
	if !together {
		if err := h.takeTokens(ctx, reqs, out); err != nil {
			return nil, err
		}
	}
	// The allowed bids by auction, in order; at[b][k] is the request of
	// batch b's k-th bid.
	var batches []redisstore.Batch
	var at [][]int
	index := make(map[int64]int, 1)
	for i, r := range reqs {
		if out[i].err != nil {
			continue
		}
		b, ok := index[r.AuctionID]
		if !ok {
			b = len(batches)
			index[r.AuctionID] = b
			batches = append(batches, redisstore.Batch{AuctionID: r.AuctionID})
			at = append(at, nil)
			if together {
				batches[b].Limit = redisstore.Limit{Rate: h.limiter.rate, Burst: h.limiter.burst}
			}
		}
		batches[b].Reqs = append(batches[b].Reqs, r.BidRequest)
		if together {
			batches[b].Limit.Take = append(batches[b].Limit.Take, h.takes(r))
		}
		at[b] = append(at[b], i)
	}
	if len(batches) == 0 {
		return out, nil
	}
	start := time.Now()
	decided := h.rs.DecideBatches(ctx, batches)
	h.loadMissing(ctx, batches, decided)
	h.metrics.scriptDuration.Observe(time.Since(start).Seconds())
	for b, d := range decided {
		for k, i := range at[b] {
			if d.Err != nil {
				out[i].err = d.Err
				continue
			}
			out[i] = hotOutcome{res: d.Decisions[k].Result, err: d.Decisions[k].Err}
		}
		if d.Err == nil {
			h.settled(batches[b].AuctionID, d)
		}
	}
	return out, nil
}

// loadMissing loads, at once, the auctions Redis lacked (ErrNoState in
// decided) from PostgreSQL, and decides their batches again in decided.
func (h *hot) loadMissing(ctx context.Context, batches []redisstore.Batch, decided []redisstore.Decided) {
	var missing []int
	for b, d := range decided {
		if errors.Is(d.Err, redisstore.ErrNoState) {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, b := range missing {
		wg.Go(func() { decided[b].Err = h.load(ctx, batches[b].AuctionID) })
	}
	wg.Wait()
	var again []redisstore.Batch
	var where []int
	for _, b := range missing {
		if decided[b].Err == nil {
			again, where = append(again, batches[b]), append(where, b)
		}
	}
	for k, d := range h.rs.DecideBatches(ctx, again) {
		decided[where[k]] = d
	}
}

// settled updates the price cache with auctionID's state after a batch,
// and tells onAccepted of accepted bids.
func (h *hot) settled(auctionID int64, d redisstore.Decided) {
	accepted, closed := false, d.Summary.Status == bidgate.StatusClosed
	for _, x := range d.Decisions {
		accepted = accepted || (x.Err == nil && !x.Result.Replayed)
		closed = closed || errors.Is(x.Err, bidgate.ErrAuctionClosed)
	}
	h.cache.update(auctionID, d.Summary.SellerID, bidgate.FromCents(d.Summary.PriceCents), bidgate.FromCents(d.Summary.IncCents), closed)
	if accepted && h.onAccepted != nil {
		h.onAccepted(auctionID)
	}
}

// takeTokens refuses, in out, the bids whose bidders are over their rate,
// in a round trip of its own (on a Redis Cluster: the buckets live in
// their lanes' slots).
func (h *hot) takeTokens(ctx context.Context, reqs []hotRequest, out []hotOutcome) error {
	if h.limiter.off() {
		return nil
	}
	var bidders []int64
	var at []int
	for i, r := range reqs {
		if h.takes(r) {
			bidders, at = append(bidders, r.BidderID), append(at, i)
		}
	}
	if len(bidders) == 0 {
		return nil
	}
	waits, err := h.limiter.take(ctx, bidders)
	if err != nil {
		return err
	}
	for k, i := range at {
		if waits[k] > 0 {
			out[i].err = &bidgate.RateLimitedError{RetryAfter: waits[k]}
		}
	}
	return nil
}

// takes says whether r takes a token: not when it took one already, nor
// when the price cache refuses it (the script refuses it too, or answers
// it as the replay it is).
func (h *hot) takes(r hotRequest) bool {
	return !r.limited && h.cache.refuses(r.BidRequest) == nil
}

// load copies a hot auction from PostgreSQL into Redis unless Redis already
// has it: a crash between creating the row and writing Redis, or a lost Redis
// state, never strands an auction.
func (h *hot) load(ctx context.Context, auctionID int64) error {
	store := pgstore.Store{DB: h.db}
	a, err := store.Auction(ctx, auctionID)
	if err != nil {
		return err
	}
	if a.Mode != bidgate.ModeHot {
		return fmt.Errorf("load auction %d into Redis: %w", auctionID, errNotHot)
	}
	bids, err := store.AcceptedBids(ctx, auctionID)
	if err != nil {
		return err
	}
	// The row counts bids only up to the first gap (persisted_seq); new
	// bids must never reuse the seq of one that is there. Its end is moved
	// by the closer, not by persisted bids: an anti-sniping extension they
	// carry (at most extend_by past the bid) is taken from them.
	for _, b := range bids {
		a.BidCount = max(a.BidCount, b.Seq)
		if end := minTime(b.EndTime, b.AcceptedAt.Add(a.ExtendBy)); end.After(a.EndTime) {
			a.EndTime = end
		}
	}
	// The newest row holds the price and the leader after it (an
	// automatic row follows the bid it answered); the leader's maximum is
	// the highest value of their own rows.
	if n := len(bids); n > 0 && bids[n-1].Seq >= a.BidCount {
		last := bids[n-1]
		a.CurrentPrice, a.LeaderID, a.LeaderMax = last.Amount, last.BidderID, last.Amount
		for _, b := range bids {
			if b.BidderID == last.BidderID && b.Value().GreaterThan(a.LeaderMax) {
				a.LeaderMax = b.Value()
			}
		}
	}
	_, err = h.rs.Load(ctx, a, bids, false)
	return err
}

var errNotHot = errors.New("auction is not hot")

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// auction overlays the live Redis state on the PostgreSQL row.
func (h *hot) auction(ctx context.Context, a bidgate.Auction) (bidgate.Auction, error) {
	st, err := h.rs.State(ctx, a.ID)
	if errors.Is(err, redisstore.ErrNoState) {
		if err = h.load(ctx, a.ID); err == nil {
			st, err = h.rs.State(ctx, a.ID)
		}
	}
	if err != nil {
		return a, err
	}
	return st.Apply(a), nil
}
