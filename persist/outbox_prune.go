package persist

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"bidgate/internal/retry"
	"bidgate/persist/pgstore"
)

// PruneConfig tunes an OutboxPruner. Zero values take DefaultPruneConfig's.
type PruneConfig struct {
	Keep  time.Duration // how long a published row is kept
	Every time.Duration // wait between passes once nothing is left to prune
	Batch int           // rows read per statement, from the head of the outbox
	Log   *slog.Logger
}

// DefaultPruneConfig is the one statement of the pruner's defaults. A week
// of published rows answers "was this close announced?" long after
// Kafka's own retention would; a flash sale adds tens of thousands a
// minute, so the table must not keep them for ever.
func DefaultPruneConfig() PruneConfig {
	return PruneConfig{Keep: 7 * 24 * time.Hour, Every: time.Minute, Batch: 5000, Log: slog.Default()}
}

func (c PruneConfig) withDefaults() PruneConfig {
	d := DefaultPruneConfig()
	c.Keep = cmp.Or(c.Keep, d.Keep)
	c.Every = cmp.Or(c.Every, d.Every)
	c.Batch = cmp.Or(c.Batch, d.Batch)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// OutboxPruner deletes published outbox rows once they are older than
// Keep, and notices' rows only once the notifier's sweep has passed them.
// Without it every event ever relayed stays in PostgreSQL. Several may run
// at once (one per relay node): each statement deletes what is left.
type OutboxPruner struct {
	db      *pgxpool.Pool
	cfg     PruneConfig
	deleted prometheus.Counter
	failed  prometheus.Counter
}

// NewOutboxPruner returns a pruner of db's outbox, with metrics on reg
// (nil: unregistered).
func NewOutboxPruner(db *pgxpool.Pool, cfg PruneConfig, reg prometheus.Registerer) *OutboxPruner {
	f := promauto.With(reg)
	return &OutboxPruner{db: db, cfg: cfg.withDefaults(),
		deleted: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_outbox_pruned_total",
			Help: "Published outbox rows deleted once older than --outbox-keep.",
		}),
		failed: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_outbox_prune_failures_total",
			Help: "Failed passes of the outbox pruner (PostgreSQL errors), retried.",
		}),
	}
}

// Run prunes until ctx ends, then returns nil: statement after statement
// while they delete rows, then one pass every Every.
func (p *OutboxPruner) Run(ctx context.Context) error {
	loop := retry.Loop{Task: "prune the outbox", Interval: p.cfg.Every, Log: p.cfg.Log,
		OnError: func(error) { p.failed.Inc() }}
	return loop.Run(ctx, func(ctx context.Context) (bool, error) {
		n, err := p.Prune(ctx)
		return n > 0, err
	})
}

// Prune runs one statement over the outbox's first Batch rows and returns
// how many it deleted.
func (p *OutboxPruner) Prune(ctx context.Context) (int64, error) {
	n, err := (&pgstore.Store{DB: p.db}).PruneEvents(ctx, p.cfg.Keep, p.cfg.Batch)
	p.deleted.Add(float64(n))
	return n, err
}
