package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Limit is one store ceiling: bidgate's own serialization statement called
// straight from Go, with no HTTP, cache, rate limit or pipeline.
type Limit struct {
	Name           string  `json:"name"`
	Store          string  `json:"store"` // redis or postgres
	Callers        int     `json:"callers"`
	Batch          int     `json:"batch"`    // bids per call
	Auctions       int     `json:"auctions"` // scratch auctions the callers share
	Seconds        float64 `json:"seconds"`
	Calls          int64   `json:"calls"`
	Decided        int64   `json:"decided"`
	Accepted       int64   `json:"accepted"`
	DecidedPerSec  float64 `json:"decidedPerSecond"`
	AcceptedPerSec float64 `json:"acceptedPerSecond"`
	Err            string  `json:"error,omitempty"`
}

// Rate is a bidgate rate to put against the limits: 201s per second, and
// decisions (201 + 409) per second.
type Rate struct {
	What     string  `json:"what"`
	Accepted float64 `json:"acceptedPerSecond"`
	Decided  float64 `json:"decidedPerSecond"`
}

// Ratio is a bidgate rate as a fraction of a limit: accepted over the
// limit's accepted, decided over the limit's decided (the sequential limits
// accept every bid they decide; concurrent callers, like concurrent
// clients of bidgate, see some bids overtaken and refused as too low).
type Ratio struct {
	Rate
	Limit            string  `json:"limit"`
	LimitAccepted    float64 `json:"limitAcceptedPerSecond"`
	LimitDecided     float64 `json:"limitDecidedPerSecond"`
	AcceptedFraction float64 `json:"acceptedFraction"`
	DecidedFraction  float64 `json:"decidedFraction"`
}

// measureLimits runs every limit for dur each, one after the other.
func (e *Env) measureLimits(ctx context.Context, dur time.Duration) []Limit {
	return []Limit{
		e.redisLimit(ctx, 1, 1, dur),
		e.redisLimit(ctx, 64, 1, dur),
		e.redisLimit(ctx, 1, 100, dur),
		e.pgLimit(ctx, 1, 1, dur),
		e.pgLimit(ctx, e.limitsConns(), 1, dur),
		e.pgLimit(ctx, e.limitsConns(), 16, dur),
	}
}

func (l *Limit) finish(elapsed time.Duration, err error) Limit {
	l.Seconds = elapsed.Seconds()
	if l.Seconds > 0 {
		l.DecidedPerSec = float64(l.Decided) / l.Seconds
		l.AcceptedPerSec = float64(l.Accepted) / l.Seconds
	}
	if err != nil {
		l.Err = err.Error()
	}
	return *l
}

// limitBidder is the bidder of a limit's n-th bid: one of 1,000, none of
// them a seller (the statements refuse a seller's own bid).
func limitBidder(n int64) int64 { return bidderFloor + 1 + n%1000 }

// redisLimit decides bids with the hot path's own call (redisstore's
// DecideBids: the batch script and its reply) on a scratch hot auction (a
// negative id, which no real auction has; its keys are deleted after) from
// callers goroutines, batch bids per call, for dur.
func (e *Env) redisLimit(ctx context.Context, callers, batch int, dur time.Duration) Limit {
	l := Limit{Store: "redis", Callers: callers, Batch: batch, Auctions: 1,
		Name: fmt.Sprintf("Redis bid script, %d caller(s), %d bid(s)/call", callers, batch)}
	id := -int64(1 + e.rng().Uint64()%(1<<40))
	rs := redisstore.New(e.rdb)
	defer func() { _ = rs.Delete(context.WithoutCancel(ctx), id) }()
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		return l.finish(0, err)
	}
	// Price 1000.00, increment 1.00, open for an hour, no anti-sniping,
	// sold by a seller none of the bidders is.
	scratch := bidgate.Auction{ID: id, SellerID: sellerID(0), CurrentPrice: decimal.NewFromInt(1000),
		MinIncrement: decimal.NewFromInt(1), Status: bidgate.StatusOpen, EndTime: now.Add(time.Hour), ExtendBy: time.Second}
	if _, err := rs.Load(ctx, scratch, nil, true); err != nil {
		return l.finish(0, err)
	}
	var (
		next                     atomic.Int64
		calls, decided, accepted atomic.Int64
		wg                       sync.WaitGroup
		errOnce                  sync.Once
		firstErr                 error
	)
	start := time.Now()
	deadline := start.Add(dur)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]bidgate.BidRequest, batch)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				n := next.Add(int64(batch)) - int64(batch)
				for k := range int64(batch) {
					reqs[k] = bidgate.BidRequest{AuctionID: id, BidderID: limitBidder(n + k), RequestID: uuid.New(),
						Amount: bidgate.FromCents(100000 + 100*(n+k+1))}
				}
				_, out, err := rs.DecideBids(ctx, id, reqs)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				calls.Add(1)
				for _, d := range out {
					decided.Add(1)
					if d.Err == nil {
						accepted.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	l.Calls, l.Decided, l.Accepted = calls.Load(), decided.Load(), accepted.Load()
	return l.finish(time.Since(start), firstErr)
}

// pgLimit runs shard.ColdBidSQL on scratch cold auctions (created here,
// deleted after) from conns connections, for dur.
func (e *Env) limitsConns() int {
	if e.opt.LimitsConns > 0 {
		return e.opt.LimitsConns
	}
	return 16
}

func (e *Env) pgLimit(ctx context.Context, conns, auctions int, dur time.Duration) Limit {
	l := Limit{Store: "postgres", Callers: conns, Batch: 1, Auctions: auctions,
		Name: fmt.Sprintf("PostgreSQL cold bid statement, %d connection(s), %d auction(s)", conns, auctions)}
	now, err := e.dbNow(ctx)
	if err != nil {
		return l.finish(0, err)
	}
	specs, err := e.createSQL(ctx, bulkAuctions{N: auctions, Title: "bidbench limits scratch", StartPrice: "100.00",
		MinIncrement: "1.00", Late: now.Add(time.Hour), LateSpread: time.Second, ExtendBy: time.Second})
	if err != nil {
		return l.finish(0, err)
	}
	scratch := ids(specs)
	defer func() {
		c := context.WithoutCancel(ctx)
		_, _ = e.db.Exec(c, `DELETE FROM bid WHERE auction_id = ANY($1)`, scratch)
		_, _ = e.db.Exec(c, `DELETE FROM auction WHERE id = ANY($1)`, scratch)
	}()
	cfg := e.db.Config()
	cfg.MaxConns, cfg.MinConns = int32(conns), int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return l.finish(0, err)
	}
	defer pool.Close()
	// Open every connection (and prepare the statement) before the clock starts.
	var warm sync.WaitGroup
	for range conns {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if c, err := pool.Acquire(ctx); err == nil {
				time.Sleep(50 * time.Millisecond)
				c.Release()
			}
		}()
	}
	warm.Wait()

	counters := make([]atomic.Int64, auctions)
	var (
		calls, accepted atomic.Int64
		wg              sync.WaitGroup
		errOnce         sync.Once
		firstErr        error
	)
	start := time.Now()
	deadline := start.Add(dur)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := c % auctions
			for time.Now().Before(deadline) && ctx.Err() == nil {
				k := counters[a].Add(1)
				amount := bidgate.FromCents(10000 + 100*k)
				var seq, leader int64
				var at, end time.Time
				var row, price decimal.Decimal
				var leading bool
				key := uuid.New()
				err := pool.QueryRow(ctx, pgstore.ColdBidSQL(), scratch[a], limitBidder(k), amount, key,
					string(bidgate.KindStraight), bidgate.AutomaticRequestID(key)).Scan(&seq, &at, &end, &row, &leading, &price, &leader)
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, pgx.ErrNoRows):
				default:
					errOnce.Do(func() { firstErr = err })
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	l.Calls, l.Decided, l.Accepted = calls.Load(), calls.Load(), accepted.Load()
	return l.finish(time.Since(start), firstErr)
}

// ratios puts bidgate's hot and cold rates against the limits of the same
// store (a Rate with no What is left out).
func ratios(hot, cold Rate, limits []Limit) []Ratio {
	var out []Ratio
	for _, l := range limits {
		r := hot
		if l.Store == "postgres" {
			r = cold
		}
		if r.What == "" || l.AcceptedPerSec <= 0 || l.DecidedPerSec <= 0 {
			continue
		}
		out = append(out, Ratio{Rate: r, Limit: l.Name, LimitAccepted: l.AcceptedPerSec, LimitDecided: l.DecidedPerSec,
			AcceptedFraction: r.Accepted / l.AcceptedPerSec, DecidedFraction: r.Decided / l.DecidedPerSec})
	}
	return out
}
