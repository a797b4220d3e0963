package shard

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// buyNow closes an auction at its buy-now price for the bidder, while no
// bid has been accepted, by the clock and in the serialization of the store
// that decides its bids: a buy-now racing the first bid loses or wins as a
// whole. PlaceBid's refusals apply, and ErrBuyNowUnavailable.
func (s *Service) buyNow(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	if err := s.limiter.allow(ctx, r.BidderID); err != nil {
		return bidgate.BidResult{}, err
	}
	if _, isHot := s.hotIDs.Load(r.AuctionID); !isHot {
		res, err := s.buyNowCold(ctx, r)
		if !errors.Is(err, errNotCold) {
			return res, err
		}
		s.hotIDs.Store(r.AuctionID, struct{}{})
	}
	return s.buyNowHot(ctx, r)
}

// buyNowCold closes the auction and writes its auction-closed event in one
// transaction; when the statement does not qualify, the look-up says why.
func (s *Service) buyNowCold(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	var closed pgstore.Closed
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		store := &pgstore.Store{DB: tx}
		c, ok, err := store.BuyNowCold(ctx, r.AuctionID, r.BidderID, r.RequestID)
		if err != nil || !ok {
			return err
		}
		closed = c
		if err := store.AddClosedEvents(ctx, bidgate.TopicAuctionClosed, []pgstore.Closed{c}); err != nil {
			return err
		}
		// Its two notices (won, sold) go through Kafka to the notifier.
		notices, err := store.CloseNotices(ctx, []int64{c.ID})
		if err != nil {
			return err
		}
		_, err = pgstore.WriteCloseNotices(ctx, tx, notices)
		return err
	})
	if err != nil {
		return bidgate.BidResult{}, err
	}
	if closed.ID == 0 {
		v, err := s.cold.lookUp(ctx, r)
		if err != nil {
			return bidgate.BidResult{}, err
		}
		if res, done, err := decide(v, r); done {
			return res, err
		}
		return bidgate.BidResult{}, bidgate.ErrBuyNowUnavailable
	}
	bid := closed.BuyNowBid(r.RequestID)
	s.log.Info("auction bought now", "auction", r.AuctionID)
	s.cache.update(r.AuctionID, 0, bid.Amount, decimal.Zero, true)
	s.cold.pub.publish(ctx, bidgate.Auction{ID: r.AuctionID, CurrentPrice: bid.Amount, LeaderID: bid.BidderID, LeaderAlias: 1,
		EndTime: bid.EndTime, Status: bidgate.StatusClosed, BidCount: 1}, bid.AcceptedAt)
	return bidgate.BidResult{Bid: bid, Leading: true, CurrentPrice: bid.Amount}, nil
}

// buyNowHot lets Redis decide (it serializes the bids), then moves the
// row's end back to the instant Redis closed it, so that the closer settles
// it and writes its event now. Should that write fail, the closer settles
// it at its original end, with the same winner.
func (s *Service) buyNowHot(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	d, err := s.rs.BuyNow(ctx, r)
	if errors.Is(err, redisstore.ErrNoState) {
		if err = s.hot.load(ctx, r.AuctionID); err == nil {
			d, err = s.rs.BuyNow(ctx, r)
		}
	}
	if err != nil {
		return bidgate.BidResult{}, fmt.Errorf("buy-now on hot auction %d: %w", r.AuctionID, err)
	}
	if d.Err != nil {
		return bidgate.BidResult{}, d.Err
	}
	bid := d.Result.Bid
	s.cache.update(r.AuctionID, 0, bid.Amount, decimal.Zero, true)
	if !d.Result.Replayed {
		s.log.Info("auction bought now", "auction", r.AuctionID)
		if s.hot.onAccepted != nil {
			s.hot.onAccepted(r.AuctionID)
		}
	}
	if err := s.store.EndHotNow(ctx, r.AuctionID, bid.EndTime); err != nil {
		s.log.Warn("auction bought now in Redis; the closer settles it at its original end", "auction", r.AuctionID, "err", err)
	}
	return d.Result, nil
}
