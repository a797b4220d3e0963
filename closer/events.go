package closer

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// addEvents writes one outbox row per closed auction inside the closing
// transaction (the event exists if and only if the close committed), and
// the closes' notices; it returns the notices, for announce.
func addEvents(ctx context.Context, store *pgstore.Store, closed []pgstore.Closed) ([]bidgate.Notice, error) {
	return store.AddClosedEvents(ctx, bidgate.TopicAuctionClosed, closed)
}

// announce publishes the final CLOSED state of each auction on its updates
// channel, for the viewers fanout pushes to, then stores the closes'
// notices and publishes them on their users' channels. It runs after the
// commit and is best effort: the outbox event and the notices' outbox rows
// are the durable record (the notifier stores what this does not).
func (c *Closer) announce(ctx context.Context, closed []pgstore.Closed, notices []bidgate.Notice) {
	if len(closed) == 0 {
		return
	}
	// The closes are committed: tell the viewers even if ctx is ending.
	ctx, cancel := finishing(ctx)
	defer cancel()
	defer c.tell(ctx, notices)
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

// noticeChunk is how many close notices one transaction stores: the
// notices' lock (which orders them) is held that long, so a close of
// thousands of bidders never holds up the notifier's outbid notices for
// more than a chunk.
const noticeChunk = 5000

// tell stores the close notices in chunks, each published once stored.
// Whatever it does not store, the notifier stores from Kafka.
func (c *Closer) tell(ctx context.Context, notices []bidgate.Notice) {
	for chunk := range slices.Chunk(notices, noticeChunk) {
		var stored map[string]bool
		err := pgstore.InTx(ctx, c.db, func(tx pgx.Tx) (err error) {
			stored, err = pgstore.StoreNotices(ctx, tx, chunk)
			return err
		})
		if err != nil {
			c.metrics.errors.WithLabelValues("announce").Inc()
			c.cfg.Log.Warn("store close notices; the notifier stores them from Kafka", "notices", len(notices), "err", err)
			return
		}
		fresh := make([]bidgate.Notice, 0, len(chunk))
		for _, n := range chunk {
			if stored[n.ID] {
				fresh = append(fresh, n)
				c.metrics.notices.WithLabelValues(string(n.Type)).Inc()
			}
		}
		if err := c.rdb.PublishNotices(ctx, fresh); err != nil {
			c.metrics.errors.WithLabelValues("announce").Inc()
			c.cfg.Log.Warn("publish close notices; their users read them from the list", "notices", len(fresh), "err", err)
		}
	}
}
