package closer

import (
	"context"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// addEvents writes one outbox row per closed auction inside the closing
// transaction (the event exists if and only if the close committed), and
// the closes' notices; it returns the notices stored, for announce.
func addEvents(ctx context.Context, store *pgstore.Store, closed []pgstore.Closed) ([]bidgate.Notice, error) {
	return store.AddClosedEvents(ctx, bidgate.TopicAuctionClosed, closed)
}

// announce publishes the final CLOSED state of each auction on its updates
// channel, for the viewers fanout pushes to, and the closes' notices on
// their users' channels. It runs after the commit and is best effort: the
// outbox event and the stored notices are the durable record.
func (c *Closer) announce(ctx context.Context, closed []pgstore.Closed, notices []bidgate.Notice) {
	if len(closed) == 0 {
		return
	}
	// The closes are committed: tell the viewers even if ctx is ending.
	ctx, cancel := finishing(ctx)
	defer cancel()
	for _, n := range notices {
		c.metrics.notices.WithLabelValues(string(n.Type)).Inc()
	}
	if err := c.rdb.PublishNotices(ctx, notices); err != nil {
		c.metrics.errors.WithLabelValues("announce").Inc()
		c.cfg.Log.Warn("publish close notices; their users read them from the list", "notices", len(notices), "err", err)
	}
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
