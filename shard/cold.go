package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
	"bidgate/persist/pgstore"
)

// errNotCold says the auction turned hot under a cold bid; the caller takes
// the hot path.
var errNotCold = errors.New("auction is not cold")

// cold serializes bids of cold auctions in PostgreSQL.
type cold struct {
	db    *pgxpool.Pool // the statement's connection is taken before its limit is set
	store *pgstore.Store
	cache *priceCache
	pub   *publisher
	// lockTimeout bounds the statement inside PostgreSQL (Config.ColdLockTimeout).
	lockTimeout time.Duration
	lanes       *lanes // one statement per auction at a time
}

// answerMargin is the time left to hear PostgreSQL cancel the statement at
// its own limit before the bid's deadline: the limit is cut to fit.
const answerMargin = 100 * time.Millisecond

// placeBid runs the one conditional statement, with the look-up after it
// in the same round trip: when the statement wrote nothing, the look-up
// says why (a replay, self-bidding, closed, too low, the leader's own bid
// that changes nothing, a promotion).
func (c *cold) placeBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	res, leader, placed, v, err := c.place(ctx, r)
	if err != nil {
		return bidgate.BidResult{}, timedOut(err, true)
	}
	if placed {
		bid, count := res.Bid, res.Bid.Seq
		if !res.Leading { // the leader's automatic row follows the bid
			count++
		}
		c.cache.update(r.AuctionID, v.Seller, res.CurrentPrice, v.Inc, false)
		c.pub.publish(ctx, bidgate.Auction{ID: r.AuctionID, CurrentPrice: res.CurrentPrice, LeaderID: leader.ID, LeaderAlias: leader.Alias,
			EndTime: bid.EndTime, Status: bidgate.StatusOpen, BidCount: count}, bid.AcceptedAt)
		return res, nil
	}
	if v == nil {
		// The statement failed on the request id: a request with the same
		// key committed first. A look-up now sees it.
		look, err := c.lookUp(ctx, r)
		if err != nil {
			return bidgate.BidResult{}, timedOut(err, true)
		}
		v = &look
	} else {
		c.refresh(r.AuctionID, *v)
	}
	if res, done, err := decide(*v, r); done {
		return res, err
	}
	// Unreachable while prices only rise, maxima only rise under a leader
	// and ends only move later: the statement refused at an earlier
	// instant, so the newer view refuses too.
	return bidgate.BidResult{}, &bidgate.BidTooLowError{CurrentPrice: v.Price, MinimumBid: v.Price.Add(v.Inc)}
}

// place runs the statement on a connection of its own, with the limit that
// is left once it has one (waiting for a free connection takes time too).
func (c *cold) place(ctx context.Context, r bidgate.BidRequest) (res bidgate.BidResult, leader pgstore.Leader, placed bool, v *pgstore.ColdView, err error) {
	leave, err := c.lanes.enter(ctx, r.AuctionID)
	if err != nil {
		// Never sent: decided (not placed).
		return res, leader, false, nil, &bidgate.TimeoutError{Err: fmt.Errorf("cold bid on auction %d: waiting for its turn: %w", r.AuctionID, err)}
	}
	defer leave()
	conn, err := c.db.Acquire(ctx)
	if err != nil {
		return res, leader, false, nil, timedOut(fmt.Errorf("cold bid on auction %d: %w", r.AuctionID, err), true)
	}
	defer conn.Release()
	limit, err := c.statementLimit(ctx)
	if err != nil {
		return res, leader, false, nil, err
	}
	return (&pgstore.Store{DB: conn}).PlaceColdBid(ctx, r, limit)
}

// statementLimit is how long PostgreSQL may let the statement wait and run:
// lockTimeout, cut so that PostgreSQL's own cancel comes back before ctx
// ends. A statement cancelled by the server is rolled back, and the bid's
// answer can say so; one abandoned by the client may still commit.
func (c *cold) statementLimit(ctx context.Context) (time.Duration, error) {
	limit := c.lockTimeout
	if deadline, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(deadline)-answerMargin)
	}
	if limit < time.Millisecond {
		return 0, &bidgate.TimeoutError{Undecided: true, Err: fmt.Errorf("no time left for the cold bid statement: %w", context.DeadlineExceeded)}
	}
	return limit, nil
}

// lookUp reads the auction and the request id's earlier bid, and refreshes
// the price cache from what it read.
func (c *cold) lookUp(ctx context.Context, r bidgate.BidRequest) (pgstore.ColdView, error) {
	v, err := c.store.LookUpBid(ctx, r)
	if err != nil {
		return v, err
	}
	c.refresh(r.AuctionID, v)
	return v, nil
}

// refresh updates the price cache from a cold auction's view.
func (c *cold) refresh(auctionID int64, v pgstore.ColdView) {
	if v.Mode == bidgate.ModeCold {
		c.cache.update(auctionID, v.Seller, v.Price, v.Inc, v.Status != bidgate.StatusOpen || !v.Running)
	}
}

// decide returns the answer the view already implies, in the order the API
// promises: a replay before any re-validation, then self-bidding, closed,
// too low, and the leader's own bids that change nothing.
func decide(v pgstore.ColdView, r bidgate.BidRequest) (res bidgate.BidResult, done bool, err error) {
	switch {
	case v.Existing != nil && v.Existing.Bid.SameAs(r):
		return *v.Existing, true, nil
	case v.Existing != nil:
		return res, true, bidgate.ErrIdempotencyKeyReused
	case v.Seller == r.BidderID:
		return res, true, bidgate.ErrSelfBidding
	case v.Status != bidgate.StatusOpen || !v.Running:
		return res, true, bidgate.ErrAuctionClosed
	case v.Mode != bidgate.ModeCold:
		return res, true, errNotCold
	case r.BuyNow && !v.BuyNowOpen:
		return res, true, bidgate.ErrBuyNowUnavailable
	case r.BuyNow:
		return res, false, nil
	case r.Amount.LessThan(v.Price.Add(v.Inc)):
		return res, true, &bidgate.BidTooLowError{CurrentPrice: v.Price, MinimumBid: v.Price.Add(v.Inc)}
	case v.Leader == r.BidderID && !r.Proxy:
		return res, true, bidgate.ErrAlreadyLeading
	case v.Leader == r.BidderID && r.Amount.LessThanOrEqual(v.LeaderMax):
		return res, true, bidgate.ErrMaxNotRaised
	}
	return res, false, nil
}
