package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/persist/redisstore"
)

func ids(specs []AuctionSpec) []int64 {
	out := make([]int64, len(specs))
	for i, s := range specs {
		out[i] = s.ID
	}
	return out
}

func hotIDs(specs []AuctionSpec) []int64 {
	var out []int64
	for _, s := range specs {
		if s.Hot {
			out = append(out, s.ID)
		}
	}
	return out
}

// collect reads what the stores hold about the auctions and bundles it with
// the records into the audit's data set.
func (e *Env) collect(ctx context.Context, specs []AuctionSpec, recs []Record, closedBy time.Time) (Dataset, error) {
	d := Dataset{Auctions: specs, Records: recs, ClosedBy: closedBy}
	all := ids(specs)
	rows, err := e.db.Query(ctx, `
SELECT id, seller_id, status, mode, start_price::text, current_price::text, min_increment::text,
       COALESCE(leader_id, 0), bid_count, end_time, COALESCE(closed_at, 'epoch'::timestamptz),
       COALESCE(reserve_price::text, ''), COALESCE(buy_now_price::text, ''), COALESCE(leader_max::text, '')
  FROM auction WHERE id = ANY($1)`, all)
	if err != nil {
		return d, fmt.Errorf("read auctions: %w", err)
	}
	d.Rows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuctionRow, error) {
		var a AuctionRow
		err := row.Scan(&a.ID, &a.SellerID, &a.Status, &a.Mode, &a.StartPrice, &a.CurrentPrice, &a.MinIncrement,
			&a.LeaderID, &a.BidCount, &a.EndTime, &a.ClosedAt, &a.ReservePrice, &a.BuyNowPrice, &a.LeaderMax)
		if a.ClosedAt.Equal(time.Unix(0, 0)) {
			a.ClosedAt = time.Time{}
		}
		return a, err
	})
	if err != nil {
		return d, fmt.Errorf("read auctions: %w", err)
	}
	rows, err = e.db.Query(ctx, `
SELECT auction_id, bidder_id, amount::text, kind, COALESCE(max_amount::text, ''), request_id, seq, accepted_at, end_time
  FROM bid WHERE auction_id = ANY($1)`, all)
	if err != nil {
		return d, fmt.Errorf("read bids: %w", err)
	}
	d.Bids, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (BidRow, error) {
		var b BidRow
		err := row.Scan(&b.AuctionID, &b.BidderID, &b.Amount, &b.Kind, &b.MaxAmount, &b.RequestID, &b.Seq, &b.AcceptedAt, &b.EndTime)
		return b, err
	})
	if err != nil {
		return d, fmt.Errorf("read bids: %w", err)
	}
	rows, err = e.db.Query(ctx, `SELECT aggregate_id, topic, payload::text FROM outbox WHERE aggregate_id = ANY($1) AND topic IN ('auction-closed', 'auction-cancelled')`, all)
	if err != nil {
		return d, fmt.Errorf("read outbox: %w", err)
	}
	d.Outbox, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OutboxRow, error) {
		var o OutboxRow
		err := row.Scan(&o.AggregateID, &o.Topic, &o.Payload)
		return o, err
	})
	if err != nil {
		return d, fmt.Errorf("read outbox: %w", err)
	}
	rows, err = e.db.Query(ctx, `SELECT id, user_id, type, auction_id, at FROM notification WHERE auction_id = ANY($1)`, all)
	if err != nil {
		return d, fmt.Errorf("read notices: %w", err)
	}
	d.Notices, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (NoticeRow, error) {
		var n NoticeRow
		err := row.Scan(&n.ID, &n.UserID, &n.Type, &n.AuctionID, &n.At)
		return n, err
	})
	if err != nil {
		return d, fmt.Errorf("read notices: %w", err)
	}
	hot := map[int64]bool{}
	for _, id := range hotIDs(specs) {
		hot[id] = true
	}
	for _, r := range d.Rows {
		if r.Mode == string(bidgate.ModeHot) {
			hot[r.ID] = true
		}
	}
	if d.Redis, err = e.redisStates(ctx, hot); err != nil {
		return d, err
	}
	return d, nil
}

// redisStates reads the state hash of each hot auction that has one.
func (e *Env) redisStates(ctx context.Context, hot map[int64]bool) (map[int64]RedisState, error) {
	out := map[int64]RedisState{}
	if len(hot) == 0 {
		return out, nil
	}
	pipe := e.rdb.Pipeline()
	cmds := map[int64]*redis.SliceCmd{}
	for id := range hot {
		cmds[id] = pipe.HMGet(ctx, redisstore.KeysOf(id).State, "price", "leader", "seq", "end_us", "status", "lmax")
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("read Redis state: %w", err)
	}
	for id, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil || len(v) != 6 || v[0] == nil {
			continue // no state: the auction was never hot in Redis, or Redis lost it
		}
		str := func(i int) string { s, _ := v[i].(string); return s }
		num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
		st := RedisState{Price: bidgate.FormatMoney(bidgate.FromCents(num(0))), Leader: num(1), Seq: num(2),
			End: time.UnixMicro(num(3)), Status: str(4)}
		if str(5) != "" {
			st.Lmax = bidgate.FormatMoney(bidgate.FromCents(num(5)))
		}
		out[id] = st
	}
	return out, nil
}

// dbNow is the database clock, the one the audit's times come from.
func (e *Env) dbNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := e.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}
