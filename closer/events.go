package closer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"bidgate"
	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// event is the auction-closed payload. The winner and price come from the
// row the same transaction settled, so every copy the relay sends (it
// delivers at least once) names the same winner.
func event(a pgstore.Closed) bidgate.AuctionClosed {
	e := bidgate.AuctionClosed{AuctionID: a.ID, WinnerID: a.Leader, FinalPrice: bidgate.FormatMoney(a.Price),
		ClosedAt: a.ClosedAt.UTC(), BidCount: a.BidCount}
	if a.Reserve.Valid {
		met := a.Leader != nil && a.Price.GreaterThanOrEqual(a.Reserve.Decimal)
		e.ReserveMet = &met
		if !met {
			e.WinnerID = nil // below the reserve nobody wins
		}
	}
	return e
}

// addEvents writes one outbox row per closed auction and notifies the
// relays, inside the closing transaction tx: the event exists if and only if
// the close committed.
func addEvents(ctx context.Context, store *pgstore.Store, closed []pgstore.Closed) error {
	events := make([]pgstore.Event, len(closed))
	for i, a := range closed {
		b, err := json.Marshal(event(a))
		if err != nil {
			return fmt.Errorf("encode auction-closed event of auction %d: %w", a.ID, err)
		}
		events[i] = pgstore.Event{AggregateID: a.ID, Payload: b}
	}
	return store.AddEvents(ctx, kafka.TopicAuctionClosed, events)
}

// announce publishes the final CLOSED state of each auction on its updates
// channel, for the viewers fanout pushes to. It runs after the commit and is
// best effort: the outbox event, not this message, is the durable record.
func (c *Closer) announce(ctx context.Context, closed []pgstore.Closed) {
	if len(closed) == 0 {
		return
	}
	// The closes are committed: tell the viewers even if ctx is ending.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	updates := make([]redisstore.Update, len(closed))
	for i, a := range closed {
		auction := bidgate.Auction{ID: a.ID, CurrentPrice: a.Price, EndTime: a.EndTime,
			Status: bidgate.StatusClosed, BidCount: a.BidCount}
		if a.Leader != nil {
			auction.LeaderID = *a.Leader
		}
		updates[i] = redisstore.UpdateOf(auction, a.ClosedAt)
	}
	if err := c.rdb.Publish(ctx, updates...); err != nil {
		c.metrics.errors.WithLabelValues("announce").Inc()
		c.cfg.Log.Warn("publish closed states", "auctions", len(closed), "err", err)
	}
}
