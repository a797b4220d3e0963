package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bidgate"
	"bidgate/internal/batch"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// hot serializes bids of hot auctions in Redis: a bid is handed once, to
// its auction's batcher, whose goroutine decides the batch in one script
// call (which also publishes the new state, and on a single Redis server
// takes the bidders' tokens first).
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
	o, err := h.batches.Do(ctx, r.AuctionID, hotRequest{BidRequest: r, limited: limited})
	if err != nil {
		return bidgate.BidResult{}, err
	}
	return o.res, o.err
}

// runBatch is the batcher's call for the waiting bids of one auction: the
// bidders' token buckets, then one script run for the bids they allow,
// loading the state from PostgreSQL first if Redis lacks it. On a single
// Redis server the script takes the tokens itself: one round trip.
func (h *hot) runBatch(ctx context.Context, auctionID int64, reqs []hotRequest) ([]hotOutcome, error) {
	out := make([]hotOutcome, len(reqs))
	var limit redisstore.Limit
	if !h.limiter.off() && h.rs.Together() {
		// One round trip: the script takes the tokens too.
		limit = redisstore.Limit{Rate: h.limiter.rate, Burst: h.limiter.burst, Take: make([]bool, len(reqs))}
		for i, r := range reqs {
			limit.Take[i] = h.takes(r)
		}
	} else if err := h.takeTokens(ctx, reqs, out); err != nil {
		return nil, err
	}
	allowed := make([]bidgate.BidRequest, 0, len(reqs))
	for i, r := range reqs {
		if out[i].err == nil {
			allowed = append(allowed, r.BidRequest)
		}
	}
	if len(allowed) == 0 {
		return out, nil
	}
	start := time.Now()
	sum, decided, err := h.rs.DecideLimitedBids(ctx, auctionID, allowed, limit)
	if errors.Is(err, redisstore.ErrNoState) {
		if err = h.load(ctx, auctionID); err == nil {
			sum, decided, err = h.rs.DecideLimitedBids(ctx, auctionID, allowed, limit)
		}
	}
	h.metrics.scriptDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, err
	}
	accepted, closed := false, sum.Status == bidgate.StatusClosed
	j := 0
	for i := range reqs {
		if out[i].err != nil {
			continue
		}
		d := decided[j]
		j++
		out[i] = hotOutcome{res: d.Result, err: d.Err}
		accepted = accepted || (d.Err == nil && !d.Result.Replayed)
		closed = closed || errors.Is(d.Err, bidgate.ErrAuctionClosed)
	}
	h.cache.update(auctionID, sum.SellerID, bidgate.FromCents(sum.PriceCents), bidgate.FromCents(sum.IncCents), closed)
	if accepted && h.onAccepted != nil {
		h.onAccepted(auctionID)
	}
	return out, nil
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
