package closer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/persist"
)

// dueHot is a hot auction whose PostgreSQL end has passed, as its locked row
// has it.
type dueHot struct {
	id       int64
	price    decimal.Decimal
	leader   *int64
	bidCount int64
	endTime  time.Time
	// persisted is how far its bids are in PostgreSQL without a gap.
	persisted int64
}

// closeHot closes one batch of hot auctions. The transaction holds their row
// locks while Redis decides each one with its own clock, so no other closer
// works on them meanwhile; the settles, the moved ends and the outbox rows
// commit together. An auction whose script call fails is left OPEN for a
// later pass and does not hold up the others. full reports a full batch that
// made progress, worth another pass at once.
func (c *Closer) closeHot(ctx context.Context) (closed int, full bool, err error) {
	var (
		settled  []closedAuction
		extended int
		skipped  []error
		selected int
		waiting  int
	)
	err = pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
		settled, extended, skipped, waiting = nil, 0, nil, 0
		rows, err := tx.Query(ctx, dueHotSQL, c.cfg.BatchSize)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dueHot, error) {
			var a dueHot
			err := row.Scan(&a.id, &a.price, &a.leader, &a.bidCount, &a.endTime, &a.persisted)
			return a, err
		})
		if err != nil {
			return err
		}
		selected = len(due)

		var settle settleArgs
		var extend extendArgs
		for _, a := range due {
			o, err := closeInRedis(ctx, c.rdb, a.id)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				skipped = append(skipped, err)
				continue
			}
			switch o.kind {
			case stateMissing:
				// Redis has no state for this auction, so it has had no hot
				// bid recorded there (hot bids go to Redis only, and a lost
				// state is reloaded from PostgreSQL by the next bid, not by
				// the closer): the PostgreSQL row, with whatever the
				// persister wrote to it, is the truth, and its end has
				// passed by the database clock.
				settle.add(a.id, a.price, a.leader, a.bidCount, a.endTime.UnixMicro())
			case stateClosed:
				if c.afterRedisClose != nil {
					if err := c.afterRedisClose(a.id); err != nil {
						return fmt.Errorf("after closing auction %d in Redis: %w", a.id, err)
					}
				}
				complete, err := c.persistAll(ctx, tx, a, o.seq)
				if err != nil {
					return err
				}
				if !complete {
					waiting++
					continue
				}
				// Redis's end is the one that decided its bids; a log
				// entry written above may carry an older, later end.
				settle.add(a.id, bidgate.FromCents(o.price), o.leader, o.seq, o.endUs)
			case stateRunning:
				// Redis's clock (or an anti-sniping extension) says not yet.
				// Moving the row's end makes it stop being due; an end that
				// did not move (clocks a hair apart) is simply seen again.
				if o.endUs > a.endTime.UnixMicro() {
					extend.add(a.id, o.endUs)
				}
			}
		}
		if len(extend.ids) > 0 {
			if _, err := tx.Exec(ctx, extendHotSQL, extend.ids, extend.endUs); err != nil {
				return fmt.Errorf("move the end of %d extended auctions: %w", len(extend.ids), err)
			}
			extended = len(extend.ids)
		}
		if len(settle.ids) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, settleHotSQL, settle.ids, settle.prices, settle.leaders, settle.bidCounts, settle.endUs)
		if err != nil {
			return err
		}
		if settled, err = collectClosed(rows); err != nil {
			return err
		}
		return addEvents(ctx, tx, settled)
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
func (c *Closer) persistAll(ctx context.Context, tx pgx.Tx, a dueHot, n int64) (bool, error) {
	if a.persisted >= n {
		return true, nil
	}
	bids, err := persist.LogBidsAfter(ctx, c.rdb, a.id, a.persisted)
	if err != nil {
		return false, err
	}
	positions, inserted, err := persist.WriteHotBids(ctx, tx, bids)
	if err != nil {
		return false, fmt.Errorf("persist the bids of auction %d: %w", a.id, err)
	}
	c.metrics.persistedAtClose.Add(float64(inserted))
	if positions[a.id] < n {
		c.unsettled.Fail(fmt.Errorf("auction %d: %d bids, %d in PostgreSQL", a.id, n, positions[a.id]))
		c.cfg.Log.Debug("hot auction ended but not all its bids are in PostgreSQL or its Redis log; not settling it",
			"auction", a.id, "bids", n, "persisted_seq", positions[a.id])
		return false, nil
	}
	return true, nil
}

// settleArgs are the columns settle_hot.sql unnests.
type settleArgs struct {
	ids       []int64
	prices    []string
	leaders   []*int64
	bidCounts []int64
	endUs     []int64
}

func (s *settleArgs) add(id int64, price decimal.Decimal, leader *int64, bidCount, endUs int64) {
	s.ids = append(s.ids, id)
	s.prices = append(s.prices, bidgate.FormatMoney(price))
	s.leaders = append(s.leaders, leader)
	s.bidCounts = append(s.bidCounts, bidCount)
	s.endUs = append(s.endUs, endUs)
}

// extendArgs are the columns extend_hot.sql unnests.
type extendArgs struct {
	ids, endUs []int64
}

func (e *extendArgs) add(id, endUs int64) {
	e.ids = append(e.ids, id)
	e.endUs = append(e.endUs, endUs)
}

// redisState says what close_auction.lua found.
type redisState int

const (
	stateMissing redisState = iota // no state in Redis
	stateClosed                    // closed, now or earlier: final state follows
	stateRunning                   // not ended by Redis's clock: endUs is the end
)

// redisOutcome is close_auction.lua's answer for one auction.
type redisOutcome struct {
	kind   redisState
	price  int64  // cents
	leader *int64 // nil when nobody bid
	seq    int64  // accepted bids
	endUs  int64
}

// closeInRedis runs close_auction.lua on the auction's state.
func closeInRedis(ctx context.Context, rdb redis.UniversalClient, id int64) (redisOutcome, error) {
	v, err := closeAuctionScript.Run(ctx, rdb, []string{persist.KeysOf(id).State}).Slice()
	if err != nil {
		return redisOutcome{}, fmt.Errorf("close auction %d in Redis: %w", id, err)
	}
	o, err := parseOutcome(v)
	if err != nil {
		return redisOutcome{}, fmt.Errorf("close auction %d in Redis: %w", id, err)
	}
	return o, nil
}

func parseOutcome(v []any) (redisOutcome, error) {
	if len(v) == 0 {
		return redisOutcome{}, errors.New("empty script result")
	}
	kind, err := persist.IntReply(v[0])
	if err != nil {
		return redisOutcome{}, err
	}
	var o redisOutcome
	switch {
	case kind == 0 && len(v) == 1:
		o.kind = stateMissing
	case kind == 2 && len(v) == 2:
		o.kind = stateRunning
		o.endUs, err = persist.IntReply(v[1])
	case kind == 1 && len(v) == 5:
		o.kind = stateClosed
		if o.price, err = persist.IntReply(v[1]); err != nil {
			return o, err
		}
		if leader, _ := v[2].(string); leader != "" {
			n, err := strconv.ParseInt(leader, 10, 64)
			if err != nil {
				return o, fmt.Errorf("bad leader %q", leader)
			}
			o.leader = &n
		}
		if o.seq, err = persist.IntReply(v[3]); err != nil {
			return o, err
		}
		o.endUs, err = persist.IntReply(v[4])
	default:
		return o, fmt.Errorf("bad script result %v", v)
	}
	return o, err
}

// expire gives settled auctions' Redis keys a time to live. It is best
// effort: a key left without one only costs memory.
func (c *Closer) expire(ctx context.Context, settled []closedAuction) {
	if len(settled) == 0 {
		return
	}
	pipe := c.rdb.Pipeline()
	for _, a := range settled {
		k := persist.KeysOf(a.id)
		for _, key := range []string{k.State, k.Reqs, k.Log, k.Relayed, k.Persisted} {
			pipe.Expire(ctx, key, c.cfg.KeepClosed)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.cfg.Log.Warn("set the time to live of closed auctions' Redis keys", "auctions", len(settled), "err", err)
	}
}
