package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
	"bidgate/internal/batch"
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
	// turns runs one group of an auction's bids at a time. Bids on one
	// cold auction all wait for its row lock in PostgreSQL anyway; waiting
	// here instead holds no connection, and the bids that came while a
	// group was in PostgreSQL go together in the next one: one round trip
	// and one commit for them all. An auction is owned by one node, so
	// this is the auction's order across the cluster too.
	turns *batch.Batchers[int64, coldCall, coldAnswer]
}

// coldCall is one bid waiting for its auction's turn, with what its caller
// allows: a bid whose caller is gone is not sent, and the group's
// statement limit fits the earliest deadline.
type coldCall struct {
	r        bidgate.BidRequest
	gone     <-chan struct{}
	deadline time.Time // zero: none
}

type coldAnswer struct {
	pgstore.ColdOutcome
	err error
}

// maxColdGroup bounds the bids of one auction in one transaction: the
// group's statements run one after another while it holds the row lock.
const maxColdGroup = 32

func newCold(db *pgxpool.Pool, store *pgstore.Store, cache *priceCache, pub *publisher, cfg Config, m *metrics) *cold {
	c := &cold{db: db, store: store, cache: cache, pub: pub, lockTimeout: cfg.ColdLockTimeout}
	c.turns = batch.New(maxColdGroup, cfg.MaxQueue, cfg.BatchIdle, c.placeGroup)
	c.turns.Timeout = cfg.StoreTimeout
	c.turns.Observe = func(n int) { m.coldGroupSize.Observe(float64(n)) }
	return c
}

// answerMargin is the time left to hear PostgreSQL cancel the statement at
// its own limit before the bid's deadline: the limit is cut to fit.
const answerMargin = 100 * time.Millisecond

// placeBid runs the one conditional statement, with the look-up after it
// in the same round trip: when the statement wrote nothing, the look-up
// says why (a replay, self-bidding, closed, too low, the leader's own bid
// that changes nothing, a promotion).
func (c *cold) placeBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	call := coldCall{r: r, gone: ctx.Done()}
	call.deadline, _ = ctx.Deadline()
	a, err := c.turns.Do(ctx, r.AuctionID, call)
	if err != nil && ctx.Err() != nil {
		// Gone while its group may be in PostgreSQL.
		return bidgate.BidResult{}, &bidgate.TimeoutError{Undecided: true, Err: fmt.Errorf("cold bid on auction %d: %w", r.AuctionID, err)}
	}
	if err == nil {
		err = a.err
	}
	if errors.Is(err, pgstore.ErrRequestRaced) {
		// A request with the same key committed first. A look-up now sees it.
		look, err := c.lookUp(ctx, r)
		if err != nil {
			return bidgate.BidResult{}, timedOut(err, true)
		}
		a.View, err = look, nil
	} else if err != nil {
		return bidgate.BidResult{}, timedOut(err, true)
	} else if !a.Placed {
		c.refresh(r.AuctionID, a.View)
	}
	if a.Placed {
		res, leader, v := a.Result, a.Leader, a.View
		bid, count := res.Bid, res.Bid.Seq
		if !res.Leading { // the leader's automatic row follows the bid
			count++
		}
		c.cache.update(r.AuctionID, v.Seller, res.CurrentPrice, v.Inc, false)
		c.pub.publish(ctx, bidgate.Auction{ID: r.AuctionID, CurrentPrice: res.CurrentPrice, LeaderID: leader.ID, LeaderAlias: leader.Alias,
			EndTime: bid.EndTime, Status: bidgate.StatusOpen, BidCount: count}, bid.AcceptedAt)
		return res, nil
	}
	if res, done, err := decide(a.View, r); done {
		return res, err
	}
	// Unreachable while prices only rise, maxima only rise under a leader
	// and ends only move later: the statement refused at an earlier
	// instant, so the newer view refuses too.
	return bidgate.BidResult{}, &bidgate.BidTooLowError{CurrentPrice: a.View.Price, MinimumBid: a.View.Price.Add(a.View.Inc)}
}

// placeGroup is the batcher's call for the waiting bids of one auction: one
// transaction for them all, on a connection of its own, with the limit
// that is left once it has one (waiting for a free connection takes time
// too). When the group fails for anything but its limit (a repeated
// request id, say), nothing of it was written, and its bids are placed
// again one by one so that each gets its own answer.
func (c *cold) placeGroup(ctx context.Context, auctionID int64, calls []coldCall) ([]coldAnswer, error) {
	out := make([]coldAnswer, len(calls))
	conn, err := c.db.Acquire(ctx)
	if err != nil {
		err = timedOut(fmt.Errorf("cold bids on auction %d: %w", auctionID, err), true)
		for i := range out {
			out[i].err = err
		}
		return out, nil
	}
	defer conn.Release()
	store := &pgstore.Store{DB: conn}
	sent := stillWaiting(calls, out)
	if len(sent) == 0 {
		return out, nil
	}
	limit := c.statementLimit(calls, sent)
	rs := make([]bidgate.BidRequest, len(sent))
	for k, i := range sent {
		rs[k] = calls[i].r
	}
	outcomes, err := store.PlaceColdBids(ctx, rs, limit)
	var timeout *bidgate.TimeoutError
	if err != nil && len(rs) > 1 && !errors.As(err, &timeout) && ctx.Err() == nil {
		for _, i := range sent {
			o, err := store.PlaceColdBid(ctx, calls[i].r, limit)
			out[i] = coldAnswer{o, err}
		}
		return out, nil
	}
	for k, i := range sent {
		if err != nil {
			out[i].err = err
		} else {
			out[i] = coldAnswer{outcomes[k], outcomes[k].Err}
		}
	}
	return out, nil
}

// stillWaiting lists the calls worth sending, and answers the others in
// out: their callers are gone, or have no time left for a statement.
func stillWaiting(calls []coldCall, out []coldAnswer) (sent []int) {
	for i, call := range calls {
		select {
		case <-call.gone:
			out[i].err = &bidgate.TimeoutError{Err: fmt.Errorf("cold bid on auction %d: gone before its turn: %w", call.r.AuctionID, context.Canceled)}
			continue
		default:
		}
		if !call.deadline.IsZero() && time.Until(call.deadline)-answerMargin < time.Millisecond {
			out[i].err = &bidgate.TimeoutError{Undecided: true, Err: fmt.Errorf("no time left for the cold bid statement: %w", context.DeadlineExceeded)}
			continue
		}
		sent = append(sent, i)
	}
	return sent
}

// statementLimit is how long PostgreSQL may let each of the sent calls'
// statements wait and run: lockTimeout, cut so that PostgreSQL's own
// cancel comes back before the earliest caller's deadline. A statement
// cancelled by the server is rolled back, and the bids' answers can say
// so; one abandoned by the client may still commit. The limit is per
// statement, but only the first can wait for the row lock: the others run
// under the group's own lock, in well under the margin.
func (c *cold) statementLimit(calls []coldCall, sent []int) time.Duration {
	limit := c.lockTimeout
	for _, i := range sent {
		if d := calls[i].deadline; !d.IsZero() {
			limit = min(limit, time.Until(d)-answerMargin)
		}
	}
	return max(limit, time.Millisecond)
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
