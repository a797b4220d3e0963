package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"bidgate"
)

var (
	//go:embed sql/buy_now_cold.sql
	buyNowColdSQL string
	//go:embed sql/end_hot_now.sql
	endHotNowSQL string
)

// BuyNowCold closes an open cold auction with no bid at its buy-now price,
// the buyer winning, and records the buy-now row, in one statement by the
// database clock; ok is false when it wrote nothing (a LookUpBid says why).
// Run it in a transaction with AddClosedEvents.
func (s *Store) BuyNowCold(ctx context.Context, auctionID, buyer int64, requestID uuid.UUID) (c Closed, ok bool, err error) {
	err = s.DB.QueryRow(ctx, buyNowColdSQL, auctionID, buyer, uuidParam(requestID)).
		Scan(&c.ID, &c.Leader, &c.Price, &c.BidCount, &c.EndTime, &c.ClosedAt, &c.Reserve)
	switch {
	case err == nil:
		return c, true, nil
	case errors.Is(err, pgx.ErrNoRows), IsUniqueViolation(err, "bid_auction_id_request_id_key"):
		return c, false, nil
	}
	return c, false, fmt.Errorf("buy-now on auction %d: %w", auctionID, err)
}

// EndHotNow moves a hot auction's end back to at, the instant Redis closed
// it by a buy-now, so that the closer settles it now rather than at its
// original end.
func (s *Store) EndHotNow(ctx context.Context, auctionID int64, at time.Time) error {
	if _, err := s.DB.Exec(ctx, endHotNowSQL, auctionID, at); err != nil {
		return fmt.Errorf("end auction %d after its buy-now: %w", auctionID, err)
	}
	return nil
}

// BuyNowBid is the row a buy-now recorded.
func (c Closed) BuyNowBid(requestID uuid.UUID) bidgate.Bid {
	var buyer int64
	if c.Leader != nil {
		buyer = *c.Leader
	}
	return bidgate.Bid{AuctionID: c.ID, BidderID: buyer, Amount: c.Price, Kind: bidgate.KindBuyNow,
		RequestID: requestID, Seq: 1, AcceptedAt: c.ClosedAt, EndTime: c.EndTime}
}
