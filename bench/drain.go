package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate/persist/redisstore"
)

// Drain is how the wait for the pipeline went.
type Drain struct {
	Waited  float64   `json:"waitedSeconds"`
	Drained bool      `json:"drained"`
	Pending string    `json:"pending,omitempty"` // what was left when the wait gave up
	At      time.Time `json:"at"`                // database time of the last look
}

// waitDrained polls until every hot auction's accepted bids (Redis's seq)
// are in the bid table, every auction past its end is CLOSED and every
// notice about them is stored, or until timeout. The audit runs either way.
func (e *Env) waitDrained(ctx context.Context, specs []AuctionSpec, timeout time.Duration) Drain {
	start := time.Now()
	deadline := start.Add(timeout)
	all := ids(specs)
	var hot []int64
	if rows, err := e.db.Query(ctx, `SELECT id FROM auction WHERE id = ANY($1) AND mode = 'HOT'`, all); err == nil {
		hot, _ = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	var d Drain
	for {
		pending, at, err := e.pending(ctx, all, hot)
		d.At, d.Pending = at, pending
		if err != nil {
			d.Pending = err.Error()
		}
		if err == nil && pending == "" {
			d.Drained = true
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.Waited = time.Since(start).Seconds()
	return d
}

// pending says what the pipeline still owes ("" when nothing), as of the
// database time it returns.
func (e *Env) pending(ctx context.Context, all, hot []int64) (string, time.Time, error) {
	var now time.Time
	if err := e.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return "", now, err
	}
	var unpersisted int64
	if len(hot) > 0 {
		persisted := map[int64]int64{}
		rows, err := e.db.Query(ctx, `SELECT auction_id, count(*) FROM bid WHERE auction_id = ANY($1) GROUP BY 1`, hot)
		if err != nil {
			return "", now, err
		}
		var id, n int64
		_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error { persisted[id] = n; return nil })
		if err != nil {
			return "", now, err
		}
		pipe := e.rdb.Pipeline()
		seqs := make([]func() int64, len(hot))
		for i, id := range hot {
			cmd := pipe.HGet(ctx, redisstore.KeysOf(id).State, "seq")
			seqs[i] = func() int64 { n, _ := cmd.Int64(); return n }
		}
		_, _ = pipe.Exec(ctx) // a missing state reads as 0
		for i, id := range hot {
			if s := seqs[i](); s > persisted[id] {
				unpersisted += s - persisted[id]
			}
		}
	}
	rows, err := e.db.Query(ctx, `SELECT id, mode FROM auction WHERE id = ANY($1) AND status = 'OPEN' AND end_time <= $2`, all, now)
	if err != nil {
		return "", now, err
	}
	type open struct {
		id   int64
		mode string
	}
	ended, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (open, error) {
		var o open
		return o, r.Scan(&o.id, &o.mode)
	})
	if err != nil {
		return "", now, err
	}
	unclosed := 0
	for _, o := range ended {
		if o.mode == "HOT" {
			// Redis decides a hot auction's end; one it extended is not due.
			if endUs, err := e.rdb.HGet(ctx, redisstore.KeysOf(o.id).State, "end_us").Int64(); err == nil && endUs > now.UnixMicro() {
				continue
			}
		}
		unclosed++
	}
	// Notices written (outbox) and not yet stored by a notifier, and closes
	// whose notices are not yet written (close_notice: a close's each).
	var unstored int64
	if err := e.db.QueryRow(ctx, `
SELECT (SELECT count(*) FROM outbox o
         WHERE o.topic = 'bid-notifications' AND (o.payload->>'auctionId')::bigint = ANY($1)
           AND NOT EXISTS (SELECT 1 FROM notification n WHERE n.id = o.payload->>'id'))
     + (SELECT count(*) FROM close_notice WHERE auction_id = ANY($1))`, all).Scan(&unstored); err != nil {
		return "", now, err
	}
	if unpersisted == 0 && unclosed == 0 && unstored == 0 {
		return "", now, nil
	}
	return fmt.Sprintf("%d hot bids not yet in the bid table, %d ended auctions not yet CLOSED, %d notices (or closes' notices) not yet stored", unpersisted, unclosed, unstored), now, nil
}
