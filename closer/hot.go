package closer

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// closeHot closes one batch of hot auctions. The transaction holds their row
// locks while Redis decides each one with its own clock, so no other closer
// works on them meanwhile; the settles, the moved ends and the outbox rows
// commit together. An auction whose script call fails is left OPEN for a
// later pass and does not hold up the others. full reports a full batch that
// made progress, worth another pass at once.
func (c *Closer) closeHot(ctx context.Context) (closed int, full bool, err error) {
	var (
		settled  []pgstore.Closed
		extended int
		skipped  []error
		selected int
		waiting  int
	)
	err = pgstore.InTx(ctx, c.db, func(tx pgx.Tx) error {
		settled, extended, skipped, waiting = nil, 0, nil, 0
		store := &pgstore.Store{DB: tx}
		due, err := store.LockDueHot(ctx, c.cfg.BatchSize)
		if err != nil {
			return err
		}
		selected = len(due)

		var settle []pgstore.Settlement
		var extend []pgstore.Extension
		var cancel []int64
		for _, a := range due {
			o, err := c.rdb.Close(ctx, a.ID)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				skipped = append(skipped, err)
				continue
			}
			switch o.Ending {
			case redisstore.NoState:
				// Redis has no state for this auction, so it has had no hot
				// bid recorded there (hot bids go to Redis only, and a lost
				// state is reloaded from PostgreSQL by the next bid, not by
				// the closer): the PostgreSQL row, with whatever the
				// persister wrote to it, is the truth, and its end has
				// passed by the database clock.
				settle = append(settle, pgstore.Settlement{ID: a.ID, Price: a.Price, Leader: a.Leader,
					BidCount: a.BidCount, EndUs: a.EndTime.UnixMicro()})
			case redisstore.Closed:
				if c.afterRedisClose != nil {
					if err := c.afterRedisClose(a.ID); err != nil {
						return fmt.Errorf("after closing auction %d in Redis: %w", a.ID, err)
					}
				}
				complete, err := c.persistAll(ctx, tx, a, o.Seq)
				if err != nil {
					return err
				}
				if !complete {
					waiting++
					continue
				}
				// Redis's end is the one that decided its bids; a log
				// entry written above may carry an older, later end.
				var leader *int64
				if o.LeaderID != 0 {
					leader = &o.LeaderID
				}
				settle = append(settle, pgstore.Settlement{ID: a.ID, Price: bidgate.FromCents(o.PriceCents),
					Leader: leader, BidCount: o.Seq, EndUs: o.EndUs})
			case redisstore.Cancelled:
				// Its seller cancelled it in Redis and the row did not
				// follow (a crash in between): it follows now.
				cancel = append(cancel, a.ID)
			case redisstore.Running:
				// Redis's clock (or an anti-sniping extension) says not yet.
				// Moving the row's end makes it stop being due; an end that
				// did not move (clocks a hair apart) is simply seen again.
				if o.EndUs > a.EndTime.UnixMicro() {
					extend = append(extend, pgstore.Extension{ID: a.ID, EndUs: o.EndUs})
				}
			}
		}
		if err := store.ExtendHot(ctx, extend); err != nil {
			return err
		}
		extended = len(extend)
		if settled, err = store.SettleHot(ctx, settle); err != nil {
			return err
		}
		cancelled, err := store.SettleCancelled(ctx, cancel)
		if err != nil {
			return err
		}
		if err := store.AddCancelEvents(ctx, bidgate.TopicAuctionCancelled, cancelled); err != nil {
			return err
		}
		return addEvents(ctx, store, settled)
	})
	if err != nil {
		return 0, false, fmt.Errorf("close hot auctions: %w", err)
	}
	c.metrics.closed.WithLabelValues("hot").Add(float64(len(settled)))
	c.metrics.waiting.Set(float64(waiting))
	if waiting == 0 {
		c.unsettled.Succeed()
	}
	c.metrics.extensions.Add(float64(extended))
	c.announce(ctx, settled)
	c.expire(ctx, settled)
	full = selected == c.cfg.BatchSize && len(settled)+extended > 0
	return len(settled), full, errors.Join(skipped...)
}

// persistAll makes sure PostgreSQL holds all n bids of hot auction a before
// it is settled, writing what is missing from the auction's Redis log inside
// the closing transaction (Kafka may have lost or not yet delivered them).
// It reports false, and logs, when bids are still missing: the auction then
// stays OPEN (Redis has closed it, so no bid is accepted meanwhile) and a
// later pass tries again.
func (c *Closer) persistAll(ctx context.Context, tx pgx.Tx, a pgstore.DueHot, n int64) (bool, error) {
	if a.Persisted >= n {
		return true, nil
	}
	bids, err := c.rdb.ReadLog(ctx, a.ID, a.Persisted)
	if err != nil {
		return false, err
	}
	if err := c.rdb.WaitReplicated(ctx, a.ID); err != nil {
		return false, err
	}
	// The closing transaction goes on locking: the notices go through the
	// outbox rather than under the notices' lock.
	w, err := pgstore.WriteHotBids(ctx, tx, bids, pgstore.QueueOutbidNotices)
	if err != nil {
		return false, fmt.Errorf("persist the bids of auction %d: %w", a.ID, err)
	}
	positions := w.Positions
	c.metrics.persistedAtClose.Add(float64(w.Inserted))
	if positions[a.ID] < n {
		c.unsettled.Fail(fmt.Errorf("auction %d: %d bids, %d in PostgreSQL", a.ID, n, positions[a.ID]))
		c.cfg.Log.Debug("hot auction ended but not all its bids are in PostgreSQL or its Redis log; not settling it",
			"auction", a.ID, "bids", n, "persisted_seq", positions[a.ID])
		return false, nil
	}
	return true, nil
}

// expire gives settled auctions' Redis keys a time to live. It is best
// effort: a key left without one only costs memory.
func (c *Closer) expire(ctx context.Context, settled []pgstore.Closed) {
	if len(settled) == 0 {
		return
	}
	ids := make([]int64, len(settled))
	for i, a := range settled {
		ids[i] = a.ID
	}
	ctx, cancel := finishing(ctx) // settled: nothing would expire them later
	defer cancel()
	if err := c.rdb.Expire(ctx, c.cfg.KeepClosed, ids...); err != nil {
		c.cfg.Log.Warn("set the time to live of closed auctions' Redis keys", "auctions", len(settled), "err", err)
	}
}
