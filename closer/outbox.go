package closer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	pkafka "bidgate/persist/kafka"
	"bidgate/retry"
)

// Writer is where the relay publishes: a *kafka.Writer bound to the topic
// (persist/kafka.NewWriter(brokers, kafka.TopicAuctionClosed, security)) in
// production, a fake in tests. WriteMessages must return nil only when every
// message is acknowledged.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// OutboxConfig tunes an OutboxRelay. Zero values take the defaults.
type OutboxConfig struct {
	Topic        string        // outbox rows relayed, and the Writer's topic; default kafka.TopicAuctionClosed
	BatchSize    int           // rows per WriteMessages call; default 500
	PollInterval time.Duration // longest wait for a notification before polling anyway; default 500ms
	MinBackoff   time.Duration // first wait after a failure; default retry.DefaultMin
	MaxBackoff   time.Duration // cap of the doubling waits; default retry.DefaultMax
	// Secret signs every event (the cluster secret), so a consumer that
	// holds it can tell bidgate's events from forged ones. Empty signs
	// nothing.
	Secret []byte
	Log    *slog.Logger // default slog.Default()
}

func (c *OutboxConfig) setDefaults() {
	if c.Topic == "" {
		c.Topic = pkafka.TopicAuctionClosed
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// OutboxRelay publishes outbox rows to Kafka, at least once, in id order
// within each batch. A row is marked published only after Kafka acknowledged
// it, in the transaction that locked it, so a crash or a Kafka failure at
// any point leaves it to be sent again (consumers are idempotent per
// auction, and every copy is identical). Several relays may run at once:
// each locks its own rows with SKIP LOCKED.
type OutboxRelay struct {
	db      *pgxpool.Pool
	w       Writer
	cfg     OutboxConfig
	metrics *outboxMetrics
}

// NewOutboxRelay returns a relay of db's outbox to w, with metrics on reg
// (nil: unregistered).
func NewOutboxRelay(db *pgxpool.Pool, w Writer, cfg OutboxConfig, reg prometheus.Registerer) *OutboxRelay {
	cfg.setDefaults()
	return &OutboxRelay{db: db, w: w, cfg: cfg, metrics: newOutboxMetrics(reg)}
}

// Run relays until ctx is done, then returns nil. After a full batch it goes
// on at once; otherwise it waits for a NOTIFY on channel outbox (the closer
// sends one with every commit) or PollInterval, whichever comes first.
// Failures back off exponentially, from MinBackoff to MaxBackoff.
func (r *OutboxRelay) Run(ctx context.Context) error {
	l := &listener{db: r.db, channel: "outbox", log: r.cfg.Log}
	defer l.close()
	// Listen before the first pass, so that no event committed after that
	// pass goes unnoticed until the next poll.
	l.listen(ctx)

	backoff := retry.Backoff{Min: r.cfg.MinBackoff, Max: r.cfg.MaxBackoff}
	failing := retry.Streak{Task: "relay the outbox to Kafka", Log: r.cfg.Log}
	for {
		n, err := r.PublishPending(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// A NOTIFY never cuts this wait short: it is not a wake-up.
			failing.Fail(err)
			if !backoff.Wait(ctx) {
				return nil
			}
			continue
		}
		failing.Succeed()
		if n > 0 {
			// Only a publish proves Kafka is back; an empty pass (another
			// relay holds the rows) keeps the back-off where it is.
			backoff.Reset()
		}
		if n == r.cfg.BatchSize {
			continue
		}
		r.observeBacklog(ctx)
		l.wait(ctx, r.cfg.PollInterval)
	}
}

// PublishPending publishes one batch of unpublished rows with one
// WriteMessages call and marks them published. It returns how many it
// published; on an error none is marked, and all are sent again later.
func (r *OutboxRelay) PublishPending(ctx context.Context) (int, error) {
	var n int
	kafkaFailed := false
	err := pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		n, kafkaFailed = 0, false
		rows, err := tx.Query(ctx, pendingOutboxSQL, r.cfg.Topic, r.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		var ids []int64
		var msgs []kafka.Message
		var id, aggregate int64
		var payload []byte
		_, err = pgx.ForEachRow(rows, []any{&id, &aggregate, &payload}, func() error {
			ids = append(ids, id)
			m := kafka.Message{Key: []byte(strconv.FormatInt(aggregate, 10)), Value: payload}
			pkafka.Sign(r.cfg.Secret, &m, r.cfg.Topic)
			msgs = append(msgs, m)
			payload = nil // the message keeps the bytes
			return nil
		})
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		if err := r.w.WriteMessages(ctx, msgs...); err != nil {
			kafkaFailed = true
			return fmt.Errorf("publish %d outbox rows (ids %d..%d) to %s: %w", len(ids), ids[0], ids[len(ids)-1], r.cfg.Topic, err)
		}
		if _, err := tx.Exec(ctx, markPublishedSQL, ids); err != nil {
			return fmt.Errorf("mark %d outbox rows published: %w", len(ids), err)
		}
		n = len(ids)
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
	return n, nil
}

// observeBacklog sets the pending and lag gauges. It runs only when the
// relay is idle, so it costs nothing during a burst.
func (r *OutboxRelay) observeBacklog(ctx context.Context) {
	var pending int64
	var lag float64
	if err := r.db.QueryRow(ctx, outboxBacklogSQL, r.cfg.Topic).Scan(&pending, &lag); err != nil {
		if ctx.Err() == nil {
			r.cfg.Log.Warn("read outbox backlog", "err", err)
		}
		return
	}
	r.metrics.pending.Set(float64(pending))
	r.metrics.lag.Set(lag)
}
