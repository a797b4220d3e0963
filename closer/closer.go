// Package closer settles auctions whose end has passed, exactly once, and
// publishes their auction-closed events through a transactional outbox.
//
// The real boundary of an auction is the bid statement's own time check
// (PostgreSQL clock_timestamp() for a cold auction, Redis TIME for a hot
// one); the closer only settles what that clock already decided. A cold
// auction is closed by one PostgreSQL statement per batch. A hot auction is
// closed in Redis first, by a script that decides with Redis's clock, then
// settled in PostgreSQL with Redis's final price and leader. Every closed
// auction gets one outbox row in the closing transaction; persist.OutboxRelay
// publishes those rows to Kafka.
//
// Any number of Closers may run at once, in one process or many: rows are
// taken with FOR UPDATE SKIP LOCKED and closed only while status is OPEN, so
// no auction is closed twice and no two winners are ever announced.
package closer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"bidgate/internal/retry"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Config tunes a Closer. Zero values take DefaultConfig's.
type Config struct {
	BatchSize int           // auctions per statement (cold) or per transaction (hot)
	Interval  time.Duration // wait after a pass that found less than a full batch
	Log       *slog.Logger
	// KeepClosed is how long a settled hot auction's Redis keys live on.
	// After that a bid or a replay finds no state and loads it from
	// PostgreSQL (CLOSED, with the request ids of its bids), so Redis does
	// not grow with every auction ever run.
	KeepClosed time.Duration
	// Replication, when it asks for replicas (--redis-wait-replicas),
	// makes the closer hand on only log entries the replicas hold: an entry
	// whose batch was never acknowledged is gone after a failover.
	Replication redisstore.Replication
	// NoticeGrace is how long after a close a pass takes up its notices
	// when the closer that closed it has not written them to the outbox.
	NoticeGrace time.Duration
}

// DefaultConfig is the one statement of the closer defaults: New fills a
// zero field from it.
func DefaultConfig() Config {
	return Config{BatchSize: 500, Interval: 250 * time.Millisecond, KeepClosed: 24 * time.Hour,
		NoticeGrace: 30 * time.Second, Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.BatchSize = cmp.Or(c.BatchSize, d.BatchSize)
	c.Interval = cmp.Or(c.Interval, d.Interval)
	c.KeepClosed = cmp.Or(c.KeepClosed, d.KeepClosed)
	c.NoticeGrace = cmp.Or(c.NoticeGrace, d.NoticeGrace)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Closer closes ended auctions. Its methods are safe for concurrent use.
type Closer struct {
	db      *pgxpool.Pool
	rdb     *redisstore.Store
	cfg     Config
	metrics *metrics

	// unsettled logs hot auctions that cannot be settled yet, rate-limited.
	unsettled retry.Streak

	// afterRedisClose, when set (tests only), runs after Redis closed hot
	// auction id and before PostgreSQL is settled; an error aborts the pass
	// and rolls its transaction back, as a crash at that point would.
	afterRedisClose func(id int64) error
	// silent, when set (tests only), closes without telling the notices,
	// as a closer that dies right after the commit.
	silent bool
}

// New returns a Closer on PostgreSQL db and Redis rdb with metrics on reg
// (nil: unregistered). Closers sharing reg share their metrics.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) *Closer {
	cfg = cfg.withDefaults()
	return &Closer{db: db, rdb: redisstore.NewReplicated(rdb, cfg.Replication), cfg: cfg, metrics: newMetrics(reg),
		unsettled: retry.Streak{Task: "settle hot auctions whose bids are not all in PostgreSQL", Log: cfg.Log}}
}

// Run closes ended auctions until ctx is done, then returns nil. It is a
// retry.Loop: a pass that found a full batch is followed by the next one at
// once, so a burst of endings drains at the speed of the database (even
// while the other mode's batch fails: a Redis outage does not slow cold
// closes); a pass that found less waits Interval; a pass that failed and
// closed no full batch waits a growing back-off, so a database or Redis
// that is down is not hit every Interval. Errors are logged and counted.
func (c *Closer) Run(ctx context.Context) error {
	loop := retry.Loop{Task: "close ended auctions", Interval: c.cfg.Interval, Log: c.cfg.Log}
	return loop.Run(ctx, func(ctx context.Context) (bool, error) {
		_, full, err := c.pass(ctx)
		return full, err
	})
}

// CloseDue runs one pass: one batch of ended cold auctions and one of ended
// hot auctions. It returns how many auctions it closed; when err is not nil
// some may still have been closed (the cold batch commits on its own).
func (c *Closer) CloseDue(ctx context.Context) (closed int, err error) {
	closed, _, err = c.pass(ctx)
	return closed, err
}

// pass is CloseDue that also reports whether a batch was full, meaning more
// auctions are probably due right now.
func (c *Closer) pass(ctx context.Context) (closed int, full bool, err error) {
	start := time.Now() // for the duration metric only, never for a decision
	defer func() {
		c.metrics.passes.Inc()
		c.metrics.duration.Observe(time.Since(start).Seconds())
	}()

	// Every node passes every Interval, and most passes find nothing: one
	// statement tells which of the stages (two transactions and a query)
	// have work. What falls due after it waits for the next pass, as it
	// would have after the stage had run.
	due, err := (&pgstore.Store{DB: c.db}).Due(ctx, c.cfg.NoticeGrace)
	if err != nil {
		c.metrics.errors.WithLabelValues("due").Inc()
		return 0, false, err
	}
	var (
		cold, hot                int
		hotFull                  bool
		coldErr, hotErr, leftErr error
	)
	if due.Cold {
		if cold, coldErr = c.closeCold(ctx); coldErr != nil {
			c.metrics.errors.WithLabelValues("cold").Inc()
		}
	}
	if due.Hot {
		if hot, hotFull, hotErr = c.closeHot(ctx); hotErr != nil {
			c.metrics.errors.WithLabelValues("hot").Inc()
		}
	}
	if due.Notices {
		if leftErr = c.tellLeft(ctx); leftErr != nil {
			c.metrics.errors.WithLabelValues("notices").Inc()
		}
	}
	full = cold == c.cfg.BatchSize || hotFull
	return cold + hot, full, errors.Join(coldErr, hotErr, leftErr)
}

// tellLeft tells the notices of closes that still owe them NoticeGrace
// after they committed.
func (c *Closer) tellLeft(ctx context.Context) error {
	left, err := (&pgstore.Store{DB: c.db}).LeftCloseNotices(ctx, c.cfg.NoticeGrace, c.cfg.BatchSize)
	if err != nil || len(left) == 0 {
		return err
	}
	c.metrics.leftNotices.Add(float64(len(left)))
	c.cfg.Log.Warn("telling the notices of closes whose closer did not", "auctions", len(left))
	ctx, cancel := finishing(ctx)
	defer cancel()
	c.tell(ctx, left)
	return nil
}

// closeCold closes one batch of ended cold auctions and writes their outbox
// rows, in one transaction.
func (c *Closer) closeCold(ctx context.Context) (int, error) {
	var closed []pgstore.Closed
	err := pgstore.InTx(ctx, c.db, func(tx pgx.Tx) error {
		store := &pgstore.Store{DB: tx}
		var err error
		if closed, err = store.CloseDueCold(ctx, c.cfg.BatchSize); err != nil {
			return err
		}
		return addEvents(ctx, store, closed)
	})
	if err != nil {
		return 0, fmt.Errorf("close cold auctions: %w", err)
	}
	c.metrics.closed.WithLabelValues("cold").Add(float64(len(closed)))
	c.announce(ctx, closed)
	return len(closed), nil
}

// finishing is the context of what follows a committed close (announcing,
// expiring): nothing would redo it, so it outlives ctx, briefly.
func finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), pgstore.FinishTimeout)
}
