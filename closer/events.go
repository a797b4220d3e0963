package closer

import (
	"context"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// addEvents writes one outbox row per closed auction inside the closing
// transaction: the event exists if and only if the close committed.
func addEvents(ctx context.Context, store *pgstore.Store, closed []pgstore.Closed) error {
	return store.AddClosedEvents(ctx, bidgate.TopicAuctionClosed, closed)
}

// announce publishes the final CLOSED state of each auction on its updates
// channel, for the viewers fanout pushes to. It runs after the commit and is
// best effort: the outbox event, not this message, is the durable record.
func (c *Closer) announce(ctx context.Context, closed []pgstore.Closed) {
	if len(closed) == 0 {
		return
	}
	// The closes are committed: tell the viewers even if ctx is ending.
	ctx, cancel := finishing(ctx)
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
