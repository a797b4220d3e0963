package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/cold_bid.sql
	coldBidSQL string
	//go:embed sql/look_up.sql
	lookUpSQL string
)

// ColdView is what PostgreSQL holds of an auction and of an earlier bid
// with the same request id, read in one snapshot.
type ColdView struct {
	Status   bidgate.Status
	Mode     bidgate.Mode
	Running  bool // end time still ahead, by the database clock
	Price    decimal.Decimal
	Inc      decimal.Decimal
	Seller   int64
	Existing *bidgate.Bid // nil when the request id is new
}

// LookUpBid reads the auction a bid is for and the bid its request id made
// before, if any. It fails with bidgate.ErrAuctionNotFound.
func (s *Store) LookUpBid(ctx context.Context, r bidgate.BidRequest) (ColdView, error) {
	var (
		v            ColdView
		status, mode string
		bidder, seq  *int64
		amount       decimal.NullDecimal
		at, end      *time.Time
	)
	err := s.DB.QueryRow(ctx, lookUpSQL, r.AuctionID, r.RequestID).
		Scan(&status, &mode, &v.Running, &v.Price, &v.Inc, &v.Seller, &bidder, &amount, &seq, &at, &end)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, bidgate.ErrAuctionNotFound
	}
	if err != nil {
		return v, fmt.Errorf("look up auction %d: %w", r.AuctionID, err)
	}
	v.Status, v.Mode = bidgate.Status(status), bidgate.Mode(mode)
	if bidder != nil {
		v.Existing = &bidgate.Bid{AuctionID: r.AuctionID, BidderID: *bidder, Amount: amount.Decimal,
			RequestID: r.RequestID, Seq: *seq, AcceptedAt: *at, EndTime: *end}
	}
	return v, nil
}

// PlaceColdBid runs the cold path's conditional statement: check and write
// in one step, by the database clock. placed is false when it wrote nothing
// (the bid lost a race to a higher bid, the end, a promotion or a request
// with the same key); a new LookUpBid then explains why.
func (s *Store) PlaceColdBid(ctx context.Context, r bidgate.BidRequest) (bid bidgate.Bid, placed bool, err error) {
	bid = bidgate.Bid{AuctionID: r.AuctionID, BidderID: r.BidderID, Amount: r.Amount, RequestID: r.RequestID}
	err = s.DB.QueryRow(ctx, coldBidSQL, r.AuctionID, r.BidderID, r.Amount, r.RequestID).
		Scan(&bid.Seq, &bid.AcceptedAt, &bid.EndTime)
	switch {
	case err == nil:
		return bid, true, nil
	case errors.Is(err, pgx.ErrNoRows), IsUniqueViolation(err, "bid_auction_id_request_id_key"):
		return bid, false, nil
	}
	return bid, false, fmt.Errorf("cold bid on auction %d: %w", r.AuctionID, err)
}

// ColdBidSQL is the cold path's statement, with parameters auction id,
// bidder id, amount, request id: the load-test harness measures
// PostgreSQL's own ceiling on it.
func ColdBidSQL() string { return coldBidSQL }
