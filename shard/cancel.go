package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Cancel cancels an auction for its seller while no bid is accepted and it
// has not ended, by the clock of the store that serializes its bids, and
// writes its auction-cancelled event in the same transaction. Cancelling a
// cancelled auction returns it again. It fails with ErrAuctionNotFound,
// ErrForbidden (another seller's), ErrAuctionClosed or ErrHasBids.
func (s *Service) Cancel(ctx context.Context, id, seller int64) (bidgate.Auction, error) {
	a, err := s.store.Auction(ctx, id)
	if err != nil {
		return a, classify(err)
	}
	switch {
	case a.SellerID != seller:
		return bidgate.Auction{}, bidgate.ErrForbidden
	case a.Status == bidgate.StatusCancelled:
		return a, nil
	case a.Status == bidgate.StatusClosed:
		return bidgate.Auction{}, bidgate.ErrAuctionClosed
	}
	if a.Mode == bidgate.ModeHot {
		err = s.cancelHot(ctx, id)
	} else {
		err = s.cancelCold(ctx, id)
	}
	if err != nil {
		return bidgate.Auction{}, classify(fmt.Errorf("cancel auction %d: %w", id, err))
	}
	s.log.Info("auction cancelled by its seller", "auction", id)
	a, err = s.primaryAuction(ctx, id) // the replica may not have the cancel yet
	if err == nil {
		s.cache.update(id, a.SellerID, a.CurrentPrice, a.MinIncrement, true)
		s.cold.pub.publish(ctx, a, time.Time{}) // whichever path: the state is final
	}
	return a, err
}

// cancelCold cancels in one statement under the row lock the bids take;
// when it does not qualify, the row says why.
func (s *Service) cancelCold(ctx context.Context, id int64) error {
	var turnedHot bool
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		store := &pgstore.Store{DB: tx}
		c, ok, err := store.CancelCold(ctx, id)
		if err != nil {
			return err
		}
		if ok {
			return store.AddCancelEvents(ctx, bidgate.TopicAuctionCancelled, []pgstore.Cancelled{c})
		}
		a, err := store.Auction(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case a.Status == bidgate.StatusCancelled:
			return nil
		case a.Mode == bidgate.ModeHot:
			turnedHot = true
			return nil
		case a.BidCount > 0 && a.Status == bidgate.StatusOpen:
			// Still open with bids: has_bids, unless its end has passed
			// too (then closed, as the bids would be told).
			if v, err := store.LookUpBid(ctx, bidgate.BidRequest{AuctionID: id}); err == nil && !v.Running {
				return bidgate.ErrAuctionClosed
			}
			return bidgate.ErrHasBids
		}
		return bidgate.ErrAuctionClosed
	})
	if err == nil && turnedHot {
		s.hotIDs.Store(id, struct{}{})
		return s.cancelHot(ctx, id)
	}
	return err
}

// cancelHot lets Redis decide (its clock and state decide the bids), then
// the row follows with the event; a crash in between is repaired by
// repeating the cancel, or by the closer at the auction's end.
func (s *Service) cancelHot(ctx context.Context, id int64) error {
	_, err := s.rs.Cancel(ctx, id)
	if errors.Is(err, redisstore.ErrNoState) {
		if err = s.hot.load(ctx, id); err == nil {
			_, err = s.rs.Cancel(ctx, id)
		}
	}
	switch {
	case errors.Is(err, redisstore.ErrCancelClosed):
		return bidgate.ErrAuctionClosed
	case errors.Is(err, redisstore.ErrCancelHasBids):
		return bidgate.ErrHasBids
	case err != nil:
		return err
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		store := &pgstore.Store{DB: tx}
		cancelled, err := store.SettleCancelled(ctx, []int64{id})
		if err != nil {
			return err
		}
		return store.AddCancelEvents(ctx, bidgate.TopicAuctionCancelled, cancelled)
	})
}
