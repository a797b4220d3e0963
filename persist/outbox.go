package persist

import (
	"bidgate"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"bidgate/internal/retry"
	pkafka "bidgate/persist/kafka"
	"bidgate/persist/pgstore"
)

// OutboxConfig tunes an OutboxRelay. Zero values take
// DefaultOutboxConfig's.
type OutboxConfig struct {
	Topic        string        // outbox rows relayed, and the Writer's topic
	BatchSize    int           // rows per WriteMessages call
	PollInterval time.Duration // longest wait for a notification before polling anyway
	// StandbyPoll is how often a relay that does not lead its topic (the
	// one relay of the cluster that listens, see listener) polls, and
	// tries for the lead.
	StandbyPoll time.Duration
	// Gather is how long after a notification the relay lets others come
	// before its pass (one pass for all of them).
	Gather time.Duration
	// VacuumEvery is how many rows the relay marks published between two
	// vacuums of the outbox's pending entries (pgstore.VacuumPending):
	// each pass steps over the entries deleted since the last one.
	VacuumEvery int
	MinBackoff  time.Duration // first wait after a failure; zero: retry.Backoff's
	MaxBackoff  time.Duration // cap of the doubling waits; zero: retry.Backoff's
	// Signer signs every event with the event-signing key, so that a
	// consumer holding the public key tells bidgate's events from forged
	// ones (and cannot forge them). Nil signs nothing.
	Signer *pkafka.Signer
	Log    *slog.Logger
}

// DefaultOutboxConfig is the one statement of the outbox relay's defaults:
// NewOutboxRelay fills a zero field from it.
func DefaultOutboxConfig() OutboxConfig {
	return OutboxConfig{Topic: bidgate.TopicAuctionClosed, BatchSize: 500, PollInterval: 500 * time.Millisecond, StandbyPoll: 2 * time.Second,
		Gather: 20 * time.Millisecond, VacuumEvery: 1000, Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from
// DefaultOutboxConfig (the back-off's are retry's own).
func (c OutboxConfig) withDefaults() OutboxConfig {
	d := DefaultOutboxConfig()
	c.Topic = cmp.Or(c.Topic, d.Topic)
	c.BatchSize = cmp.Or(c.BatchSize, d.BatchSize)
	c.PollInterval = cmp.Or(c.PollInterval, d.PollInterval)
	c.StandbyPoll = cmp.Or(c.StandbyPoll, d.StandbyPoll)
	c.Gather = cmp.Or(c.Gather, d.Gather)
	c.VacuumEvery = cmp.Or(c.VacuumEvery, d.VacuumEvery)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// OutboxRelay publishes outbox rows to Kafka, at least once, in id order
// within each batch. A row is marked published only after Kafka acknowledged
// it, in the transaction that locked it, so a crash or a Kafka failure at
// any point leaves it to be sent again (consumers are idempotent per
// auction, and every copy is identical). Several relays may run at once:
// each locks its own rows with SKIP LOCKED, and one of them, the leader,
// is woken by every commit (listener).
type OutboxRelay struct {
	db      *pgxpool.Pool
	w       Writer
	cfg     OutboxConfig
	metrics *outboxMetrics
	// marked counts the rows marked published since the last vacuum.
	marked atomic.Int64
}

// NewOutboxRelay returns a relay of db's outbox to w, with metrics on reg
// (nil: unregistered).
func NewOutboxRelay(db *pgxpool.Pool, w Writer, cfg OutboxConfig, reg prometheus.Registerer) *OutboxRelay {
	cfg = cfg.withDefaults()
	return &OutboxRelay{db: db, w: w, cfg: cfg, metrics: newOutboxMetrics(reg)}
}

// Run relays until ctx is done, then returns nil. After a full batch it goes
// on at once; otherwise, leading its topic, it waits for a NOTIFY on its
// topic's channel (every commit that adds rows of the topic sends one) or
// PollInterval, whichever comes first, and after a NOTIFY, Gather more for
// one pass; not leading, StandbyPoll. After a wait that timed out it
// passes only when the backlog holds rows.
// Failures back off exponentially, from MinBackoff to MaxBackoff.
func (r *OutboxRelay) Run(ctx context.Context) error {
	l := &listener{db: r.db, topic: r.cfg.Topic, standby: r.cfg.StandbyPoll, leading: r.metrics.leading, log: r.cfg.Log}
	defer l.close()
	l.listen(ctx)
	var (
		observed time.Time
		idle     bool // the backlog read after the last wait found no row
	)
	loop := retry.Loop{Task: "relay the outbox to Kafka", Log: r.cfg.Log,
		Backoff: retry.Backoff{Min: r.cfg.MinBackoff, Max: r.cfg.MaxBackoff},
		Idle: func(ctx context.Context) {
			woken := l.wait(ctx, r.cfg.PollInterval)
			if woken {
				l.gather(ctx, r.cfg.Gather)
			}
			// After a wait that timed out (every wait of a relay that does
			// not lead), the backlog says whether a pass would find a row:
			// one statement instead of a transaction of three on every
			// node, every topic, every poll. Between notifications that
			// come faster than PollInterval it is read once a PollInterval
			// at most: each time would double the passes' cost.
			idle = false
			if !woken || time.Since(observed) >= r.cfg.PollInterval {
				pending, err := r.observeBacklog(ctx)
				observed = time.Now()
				idle = !woken && err == nil && pending == 0
			}
		}}
	return loop.Run(ctx, func(ctx context.Context) (bool, error) {
		if idle {
			return false, nil
		}
		n, err := r.PublishPending(ctx)
		return n == r.cfg.BatchSize, err
	})
}

// PublishPending publishes one batch of unpublished rows with one
// WriteMessages call and marks them published. A notice already stored
// (Event.Delivered) is marked without being sent. It returns how many rows
// it marked; on an error none is, and all are sent again later.
func (r *OutboxRelay) PublishPending(ctx context.Context) (int, error) {
	var n, delivered int
	kafkaFailed := false
	err := pgstore.InTx(ctx, r.db, func(tx pgx.Tx) error {
		n, delivered, kafkaFailed = 0, 0, false
		store := pgstore.Store{DB: tx}
		events, err := store.PendingEvents(ctx, r.cfg.Topic, r.cfg.BatchSize)
		if err != nil || len(events) == 0 {
			return err
		}
		ids := make([]int64, len(events))
		msgs := make([]kafka.Message, 0, len(events))
		for i, e := range events {
			ids[i] = e.ID
			if !e.Delivered {
				msgs = append(msgs, kafka.Message{Key: []byte(strconv.FormatInt(e.AggregateID, 10)), Value: e.Payload})
			}
		}
		if len(msgs) > 0 {
			r.cfg.Signer.SignBatch(msgs, r.cfg.Topic)
			if err := r.w.WriteMessages(ctx, msgs...); err != nil {
				kafkaFailed = true
				return fmt.Errorf("publish %d outbox rows (ids %d..%d) to %s: %w", len(msgs), ids[0], ids[len(ids)-1], r.cfg.Topic, err)
			}
		}
		if err := store.MarkPublished(ctx, r.cfg.Topic, ids); err != nil {
			return err
		}
		n, delivered = len(ids), len(ids)-len(msgs)
		return nil
	})
	if err != nil {
		switch {
		case kafkaFailed:
			r.metrics.failures.WithLabelValues("kafka").Inc()
		case ctx.Err() == nil:
			r.metrics.failures.WithLabelValues("postgres").Inc()
		}
		return 0, err
	}
	r.metrics.published.Add(float64(n))
	r.metrics.delivered.Add(float64(delivered))
	if n > 0 {
		r.metrics.batch.Observe(float64(n))
	}
	if r.marked.Add(int64(n)) >= int64(r.cfg.VacuumEvery) {
		r.marked.Store(0)
		// A pass's rows are published whatever becomes of the vacuum.
		if err := (&pgstore.Store{DB: r.db}).VacuumPending(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("clean the outbox's published entries", "err", err)
		}
	}
	return n, nil
}

// observeBacklog sets the pending and lag gauges and returns the rows
// pending. It runs only when the relay is idle, so it costs nothing during
// a burst.
func (r *OutboxRelay) observeBacklog(ctx context.Context) (int64, error) {
	pending, lag, err := (&pgstore.Store{DB: r.db}).OutboxBacklog(ctx, r.cfg.Topic)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Log.Warn("read outbox backlog", "err", err)
		}
		return 0, err
	}
	r.metrics.pending.Set(float64(pending))
	r.metrics.lag.Set(lag)
	return pending, nil
}
