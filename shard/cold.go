package shard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/persist"
)

var (
	//go:embed sql/cold_bid.sql
	coldBidSQL string
	//go:embed sql/look_up.sql
	lookUpSQL string
)

// errNotCold says the auction turned hot under a cold bid; the caller takes
// the hot path.
var errNotCold = errors.New("auction is not cold")

// cold serializes bids of cold auctions in PostgreSQL.
type cold struct {
	db    *pgxpool.Pool
	cache *priceCache
	pub   *publisher
}

// coldView is what look_up.sql sees of an auction and of an earlier bid with
// the same request id.
type coldView struct {
	status   bidgate.Status
	mode     bidgate.Mode
	running  bool // end time still ahead, by the database clock
	price    decimal.Decimal
	inc      decimal.Decimal
	seller   int64
	existing *bidgate.Bid
}

// placeBid answers from the look-up when it can (replay, self-bidding,
// closed, too low), else runs the one conditional statement; when that
// writes nothing, a second look-up explains why.
func (c *cold) placeBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	v, err := c.lookUp(ctx, r)
	if err != nil {
		return bidgate.BidResult{}, err
	}
	if res, done, err := v.decide(r); done {
		return res, err
	}

	bid := bidgate.Bid{AuctionID: r.AuctionID, BidderID: r.BidderID, Amount: r.Amount, RequestID: r.RequestID}
	err = c.db.QueryRow(ctx, coldBidSQL, r.AuctionID, r.BidderID, r.Amount, r.RequestID).
		Scan(&bid.Seq, &bid.AcceptedAt, &bid.EndTime)
	switch {
	case err == nil:
		c.cache.update(r.AuctionID, v.seller, r.Amount, v.inc, false)
		c.pub.publish(ctx, bidgate.Auction{ID: r.AuctionID, CurrentPrice: r.Amount, LeaderID: r.BidderID,
			EndTime: bid.EndTime, Status: bidgate.StatusOpen, BidCount: bid.Seq}, bid.AcceptedAt)
		return bidgate.BidResult{Bid: bid}, nil
	case errors.Is(err, pgx.ErrNoRows), persist.IsUniqueViolation(err, "bid_auction_id_request_id_key"):
		// Lost a race: to a higher bid, to the end, to a promotion, or to a
		// request with the same key. The look-up now sees the winner.
	default:
		return bidgate.BidResult{}, fmt.Errorf("cold bid on auction %d: %w", r.AuctionID, err)
	}

	if v, err = c.lookUp(ctx, r); err != nil {
		return bidgate.BidResult{}, err
	}
	if res, done, err := v.decide(r); done {
		return res, err
	}
	// Unreachable while prices only rise and ends only move later: the
	// statement refused at an earlier instant, so the newer view refuses too.
	return bidgate.BidResult{}, &bidgate.BidTooLowError{CurrentPrice: v.price, MinimumBid: v.price.Add(v.inc)}
}

func (c *cold) lookUp(ctx context.Context, r bidgate.BidRequest) (coldView, error) {
	var (
		v            coldView
		status, mode string
		bidder, seq  *int64
		amount       decimal.NullDecimal
		at, end      *time.Time
	)
	err := c.db.QueryRow(ctx, lookUpSQL, r.AuctionID, r.RequestID).
		Scan(&status, &mode, &v.running, &v.price, &v.inc, &v.seller, &bidder, &amount, &seq, &at, &end)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, bidgate.ErrAuctionNotFound
	}
	if err != nil {
		return v, fmt.Errorf("look up auction %d: %w", r.AuctionID, err)
	}
	v.status, v.mode = bidgate.Status(status), bidgate.Mode(mode)
	if v.mode == bidgate.ModeCold {
		c.cache.update(r.AuctionID, v.seller, v.price, v.inc, v.status != bidgate.StatusOpen || !v.running)
	}
	if bidder != nil {
		v.existing = &bidgate.Bid{AuctionID: r.AuctionID, BidderID: *bidder, Amount: amount.Decimal,
			RequestID: r.RequestID, Seq: *seq, AcceptedAt: *at, EndTime: *end}
	}
	return v, nil
}

// decide returns the answer the view already implies, in the order the API
// promises: a replay before any re-validation, then closed, then too low.
func (v coldView) decide(r bidgate.BidRequest) (res bidgate.BidResult, done bool, err error) {
	switch {
	case v.existing != nil && v.existing.SameAs(r):
		return bidgate.BidResult{Bid: *v.existing, Replayed: true}, true, nil
	case v.existing != nil:
		return res, true, bidgate.ErrIdempotencyKeyReused
	case v.seller == r.BidderID:
		return res, true, bidgate.ErrSelfBidding
	case v.status != bidgate.StatusOpen || !v.running:
		return res, true, bidgate.ErrAuctionClosed
	case v.mode != bidgate.ModeCold:
		return res, true, errNotCold
	case r.Amount.LessThan(v.price.Add(v.inc)):
		return res, true, &bidgate.BidTooLowError{CurrentPrice: v.price, MinimumBid: v.price.Add(v.inc)}
	}
	return res, false, nil
}
