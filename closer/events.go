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
// records that the closes owe their notices.
func addEvents(ctx context.Context, store *pgstore.Store, closed []pgstore.Closed) error {
	return store.AddClosedEvents(ctx, bidgate.TopicAuctionClosed, closed)
}

// announce publishes the final CLOSED state of each auction on its updates
// channel, for the viewers fanout pushes to, then tells the closes'
// notices. It runs after the commit; what it does not finish, a later pass
// does (close_notice, the notices' outbox rows).
func (c *Closer) announce(ctx context.Context, closed []pgstore.Closed) {
	if len(closed) == 0 {
		return
	}
	// The closes are committed: tell the viewers even if ctx is ending.
	ctx, cancel := finishing(ctx)
	defer cancel()
	ids := make([]int64, len(closed))
	updates := make([]redisstore.Update, len(closed))
	for i, a := range closed {
		ids[i] = a.ID
		auction := bidgate.Auction{ID: a.ID, CurrentPrice: a.Price, EndTime: a.EndTime,
			Status: bidgate.StatusClosed, BidCount: a.BidCount}
		if a.Leader != nil {
			auction.LeaderID = *a.Leader
		}
		updates[i] = redisstore.UpdateOf(auction, a.ClosedAt)
	}
	defer c.tell(ctx, ids)
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

// tell delivers the notices that closes ids owe. It stores them in
// chunks, each published once stored, first those of users listening on
// /ws/me, so that they hear of a close within a chunk's time however many
// bidders it tells; then the others; then it writes them all to the outbox
// (for Kafka, and for the notifier to store what this could not). Last,
// so that the notifier finds the Kafka copies stored and skips them
// unverified: racing it made both verify and store thousands at once.
// What fails here, the pass after NoticeGrace does again.
func (c *Closer) tell(ctx context.Context, ids []int64) {
	if c.silent {
		return
	}
	notices, err := (&pgstore.Store{DB: c.db}).CloseNotices(ctx, ids)
	if err != nil {
		c.metrics.errors.WithLabelValues("notices").Inc()
		c.cfg.Log.Warn("read close notices; a later pass tells them", "auctions", len(ids), "err", err)
		return
	}
	listening, rest := c.listenersFirst(ctx, notices)
	c.storeAll(ctx, listening)
	c.storeAll(ctx, rest)
	err = pgstore.InTx(ctx, c.db, func(tx pgx.Tx) error {
		_, err := pgstore.WriteCloseNotices(ctx, tx, notices)
		return err
	})
	if err != nil {
		c.metrics.errors.WithLabelValues("notices").Inc()
		c.cfg.Log.Warn("write close notices to the outbox; a later pass does", "auctions", len(ids), "err", err)
	}
}

// storeAll stores notices in chunks, each published once stored; it stops
// at the first chunk it cannot store (the notifier stores the rest).
func (c *Closer) storeAll(ctx context.Context, notices []bidgate.Notice) {
	for chunk := range slices.Chunk(notices, noticeChunk) {
		if !c.store(ctx, chunk) {
			return
		}
	}
}

// listenersFirst splits notices into those of users listening on /ws/me
// and the others. When Redis cannot say, all are the others.
func (c *Closer) listenersFirst(ctx context.Context, notices []bidgate.Notice) (listening, rest []bidgate.Notice) {
	if len(notices) <= 1 {
		return nil, notices
	}
	users := make([]int64, 0, len(notices))
	for _, n := range notices {
		users = append(users, n.UserID)
	}
	slices.Sort(users)
	on, err := c.rdb.Listening(ctx, slices.Compact(users))
	if err != nil {
		c.cfg.Log.Warn("ask who listens; close notices go in their order", "notices", len(notices), "err", err)
		return nil, notices
	}
	rest = make([]bidgate.Notice, 0, len(notices))
	for _, n := range notices {
		if on[n.UserID] {
			listening = append(listening, n)
		} else {
			rest = append(rest, n)
		}
	}
	return listening, rest
}

// store stores chunk in one transaction and publishes what it stored; false
// when it could not store it (the rest is then left to the notifier).
func (c *Closer) store(ctx context.Context, chunk []bidgate.Notice) bool {
	var stored map[string]bool
	err := pgstore.InTx(ctx, c.db, func(tx pgx.Tx) (err error) {
		stored, err = pgstore.StoreNotices(ctx, tx, chunk)
		return err
	})
	if err != nil {
		c.metrics.errors.WithLabelValues("notices").Inc()
		c.cfg.Log.Warn("store close notices; the notifier stores them from Kafka", "notices", len(chunk), "err", err)
		return false
	}
	fresh := make([]bidgate.Notice, 0, len(chunk))
	for _, n := range chunk {
		if stored[n.ID] {
			fresh = append(fresh, n)
			c.metrics.notices.WithLabelValues(string(n.Type)).Inc()
		}
	}
	if err := c.rdb.PublishNotices(ctx, fresh); err != nil {
		c.metrics.errors.WithLabelValues("notices").Inc()
		c.cfg.Log.Warn("publish close notices; their users read them from the list", "notices", len(fresh), "err", err)
	}
	return true
}
