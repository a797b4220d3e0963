package persist

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"bidgate"
	pkafka "bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// NotifierConfig tunes a Notifier. Zero values take DefaultNotifierConfig's.
type NotifierConfig struct {
	MaxBatch int           // messages per transaction
	MaxWait  time.Duration // how long a batch waits to fill after its first message
	// Keep is how long a stored notice is kept; RetentionEvery how often
	// older ones are deleted, RetentionBatch at most per statement.
	Keep           time.Duration
	RetentionEvery time.Duration
	RetentionBatch int
	// The sweep stores, every SweepEvery, the notices whose outbox rows
	// were published more than SweepGrace ago and are not stored (a
	// broker that lost them), SweepBatch rows per transaction.
	SweepEvery time.Duration
	SweepGrace time.Duration
	SweepBatch int
	// Verifier checks every message's signature; nil verifies nothing (an
	// insecure cluster).
	Verifier *pkafka.Verifier
	Log      *slog.Logger
}

// DefaultNotifierConfig is the one statement of the notifier's defaults.
// A batch waits 40 ms, for the persister's reason (DefaultPersisterConfig):
// fewer, larger transactions on every node, each serialized on the notices'
// lock.
func DefaultNotifierConfig() NotifierConfig {
	return NotifierConfig{MaxBatch: 1000, MaxWait: 40 * time.Millisecond, Keep: 30 * 24 * time.Hour,
		RetentionEvery: time.Minute, RetentionBatch: 5000,
		SweepEvery: 2 * time.Second, SweepGrace: 10 * time.Second, SweepBatch: 5000, Log: slog.Default()}
}

func (c NotifierConfig) withDefaults() NotifierConfig {
	d := DefaultNotifierConfig()
	c.MaxBatch = cmp.Or(c.MaxBatch, d.MaxBatch)
	c.MaxWait = cmp.Or(c.MaxWait, d.MaxWait)
	c.Keep = cmp.Or(c.Keep, d.Keep)
	c.RetentionEvery = cmp.Or(c.RetentionEvery, d.RetentionEvery)
	c.RetentionBatch = cmp.Or(c.RetentionBatch, d.RetentionBatch)
	c.SweepEvery = cmp.Or(c.SweepEvery, d.SweepEvery)
	c.SweepGrace = cmp.Or(c.SweepGrace, d.SweepGrace)
	c.SweepBatch = cmp.Or(c.SweepBatch, d.SweepBatch)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Notifier stores the notices of bid-notifications in PostgreSQL, one
// transaction per fetched batch, then publishes the ones it stored on their
// users' Redis channels, then commits the Kafka offsets: a crash in between
// delivers the batch again, and a notice's id (derived from its cause)
// makes the second store a no-op. Several notifiers in one consumer group
// share the partitions. Publishing is best effort: a user connected when
// Redis fails reads the notice back from the list.
type Notifier struct {
	db        *pgxpool.Pool
	store     *pgstore.Store
	rdb       *redisstore.Store
	r         Reader
	cfg       NotifierConfig
	metrics   *notifierMetrics
	rejectLog rate.Sometimes
}

// NewNotifier returns a Notifier reading r, metrics on reg.
func NewNotifier(db *pgxpool.Pool, rdb redis.UniversalClient, r Reader, cfg NotifierConfig, reg prometheus.Registerer) *Notifier {
	cfg = cfg.withDefaults()
	return &Notifier{db: db, store: &pgstore.Store{DB: db}, rdb: redisstore.New(rdb), r: r, cfg: cfg,
		metrics: newNotifierMetrics(reg), rejectLog: rate.Sometimes{Interval: 10 * time.Second}}
}

// Run stores notices until ctx ends, and returns nil then; failures are
// retried after a back-off, with the same batch.
func (n *Notifier) Run(ctx context.Context) error {
	return consume(ctx, n.r, consumer{task: "store notices from Kafka", what: "notices", maxBatch: n.cfg.MaxBatch,
		maxWait: n.cfg.MaxWait, log: n.cfg.Log, kafkaErrors: n.metrics.errors.WithLabelValues("kafka"), handle: n.deliver})
}

// deliver stores a batch's valid notices and publishes the new ones.
// Many notices come twice (a close's from the closer, which stores them
// itself; a hot outbid the previous version's relay sent, which the row's
// writer stores): a message whose id is stored already changes nothing, so its
// signature is not checked (Ed25519 verification is the notifier's main
// cost); every message that could be stored is verified first.
func (n *Notifier) deliver(ctx context.Context, msgs []kafka.Message) error {
	type candidate struct {
		m kafka.Message
		x bidgate.Notice
	}
	candidates := make([]candidate, 0, len(msgs))
	ids := make([]string, 0, len(msgs))
	for _, m := range msgs {
		var x bidgate.Notice
		err := json.Unmarshal(m.Value, &x)
		if err == nil {
			err = x.Validate()
		}
		if err == nil && string(m.Key) != strconv.FormatInt(x.UserID, 10) {
			err = errors.New("key is not the notice's user")
		}
		if err != nil {
			n.reject("malformed", m, err)
			continue
		}
		candidates = append(candidates, candidate{m, x})
		ids = append(ids, x.ID)
	}
	if len(candidates) == 0 {
		return nil
	}
	known, err := n.store.StoredNotices(ctx, ids)
	if err != nil {
		n.metrics.errors.WithLabelValues("postgres").Inc()
		return err
	}
	notices := make([]bidgate.Notice, 0, len(candidates))
	fetch := n.cfg.Verifier.Fetch()
	for _, c := range candidates {
		switch {
		case known[c.x.ID]:
			n.metrics.known.Inc()
		case !fetch.Verify(c.m):
			n.reject("signature", c.m, errors.New("bad or missing signature"))
		default:
			known[c.x.ID] = true // once per batch
			notices = append(notices, c.x)
		}
	}
	if len(notices) == 0 {
		return nil
	}
	fresh, err := n.storeNotices(ctx, notices)
	if err != nil {
		return err
	}
	n.publish(ctx, fresh)
	return nil
}

// storeNotices stores notices in one transaction and returns the ones stored now
// (not before).
func (n *Notifier) storeNotices(ctx context.Context, notices []bidgate.Notice) ([]bidgate.Notice, error) {
	var stored map[string]bool
	err := pgstore.InTx(ctx, n.db, func(tx pgx.Tx) (err error) {
		stored, err = pgstore.StoreNotices(ctx, tx, notices)
		return err
	})
	if err != nil {
		n.metrics.errors.WithLabelValues("postgres").Inc()
		return nil, err
	}
	return n.fresh(notices, stored), nil
}

// fresh returns the notices stored now, and counts them.
func (n *Notifier) fresh(notices []bidgate.Notice, stored map[string]bool) []bidgate.Notice {
	now := time.Now()
	var fresh []bidgate.Notice
	for _, x := range notices {
		if stored[x.ID] {
			fresh = append(fresh, x)
			n.metrics.stored.WithLabelValues(string(x.Type)).Inc()
			n.metrics.storeLag.Observe(now.Sub(x.At).Seconds())
		}
	}
	return fresh
}

// publish sends notices to their users' channels, best effort.
func (n *Notifier) publish(ctx context.Context, notices []bidgate.Notice) {
	if len(notices) == 0 {
		return
	}
	if err := n.rdb.PublishNotices(ctx, notices); err != nil {
		n.metrics.errors.WithLabelValues("redis").Inc()
		n.cfg.Log.Warn("publishing notices failed; their users read them from the list", "notices", len(notices), "err", err)
	}
}

// RunSweep stores, every SweepEvery until ctx ends, the notices Kafka lost:
// those whose outbox rows were published SweepGrace ago or more and are
// still not stored. The embedded broker keeps messages in memory, so a
// broker killed after acknowledging a notice forgets it; the outbox row is
// the notice's durable copy. Several notifiers may sweep: they take turns
// on the sweep's cursor.
func (n *Notifier) RunSweep(ctx context.Context) error {
	t := time.NewTicker(n.cfg.SweepEvery)
	defer t.Stop()
	for {
		for {
			swept, err := n.SweepOnce(ctx)
			if err != nil {
				if ctx.Err() == nil {
					n.cfg.Log.Warn("sweeping for lost notices failed; retrying at the next pass", "err", err)
				}
				break
			}
			if swept < n.cfg.SweepBatch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SweepOnce checks one batch of published notice rows after the sweep's
// cursor, stores (and publishes) the ones missing, and moves the cursor
// past the batch. It returns how many rows it checked: none while another
// notifier sweeps.
func (n *Notifier) SweepOnce(ctx context.Context) (int, error) {
	var (
		checked int
		lost    []bidgate.Notice
		stored  map[string]bool
	)
	err := pgstore.InTx(ctx, n.db, func(tx pgx.Tx) error {
		payloads, upto, read, err := pgstore.UnstoredNotices(ctx, tx, n.cfg.SweepGrace, n.cfg.SweepBatch)
		if err != nil {
			return err
		}
		checked, lost, stored = read, lost[:0], nil
		for _, p := range payloads {
			var x bidgate.Notice
			if err := json.Unmarshal(p, &x); err != nil || x.Validate() != nil {
				// bidgate wrote the row; one it cannot read is counted and
				// passed over, never retried for ever.
				n.metrics.rejected.WithLabelValues("malformed").Inc()
				continue
			}
			lost = append(lost, x)
		}
		if len(lost) > 0 {
			if stored, err = pgstore.StoreNotices(ctx, tx, lost); err != nil {
				return err
			}
		}
		return pgstore.AdvanceNoticeSweep(ctx, tx, upto)
	})
	if errors.Is(err, pgstore.ErrSweepBusy) {
		return 0, nil
	}
	if err != nil {
		n.metrics.errors.WithLabelValues("postgres").Inc()
		return 0, err
	}
	fresh := n.fresh(lost, stored)
	if len(fresh) > 0 {
		n.metrics.recovered.Add(float64(len(fresh)))
		n.cfg.Log.Warn("stored notices Kafka lost, from their outbox rows", "notices", len(fresh))
	}
	n.publish(ctx, fresh)
	return checked, nil
}

// reject counts a dropped message and logs it, rate-limited.
func (n *Notifier) reject(reason string, m kafka.Message, err error) {
	n.metrics.rejected.WithLabelValues(reason).Inc()
	n.rejectLog.Do(func() {
		n.cfg.Log.Error("dropped bid-notifications messages bidgate did not write (logged at most every 10s; see bidgate_notifier_rejected_messages_total)",
			"reason", reason, "partition", m.Partition, "offset", m.Offset, "err", err)
	})
}

// RunRetention deletes notices older than Keep every RetentionEvery, in
// batches of RetentionBatch, until ctx ends. Several may run at once.
func (n *Notifier) RunRetention(ctx context.Context) error {
	t := time.NewTicker(n.cfg.RetentionEvery)
	defer t.Stop()
	for {
		for {
			deleted, err := n.store.DeleteOldNotices(ctx, n.cfg.Keep, n.cfg.RetentionBatch)
			if err != nil {
				if ctx.Err() == nil {
					n.metrics.errors.WithLabelValues("postgres").Inc()
					n.cfg.Log.Warn("deleting old notices failed; retrying at the next pass", "err", err)
				}
				break
			}
			n.metrics.deleted.Add(float64(deleted))
			if deleted < int64(n.cfg.RetentionBatch) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type notifierMetrics struct {
	stored, rejected, errors  *prometheus.CounterVec
	deleted, recovered, known prometheus.Counter
	storeLag                  prometheus.Histogram
}

func newNotifierMetrics(reg prometheus.Registerer) *notifierMetrics {
	f := promauto.With(reg)
	m := &notifierMetrics{
		stored: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_notices_stored_total", Help: "Notices stored for their users (each once, however often delivered), by type."}, []string{"type"}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_notifier_rejected_messages_total", Help: "bid-notifications messages dropped unstored, by reason: signature (not signed by an event-verifying key) or malformed."}, []string{"reason"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_notifier_errors_total", Help: "Notifier failures, retried, by the dependency that failed (kafka, postgres, redis)."}, []string{"dependency"}),
		deleted: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_notices_deleted_total", Help: "Notices deleted by the retention job (older than the retention)."}),
		known: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_notifier_known_messages_total", Help: "bid-notifications messages skipped because their notice was stored already (the other copy came first), unverified: they change nothing."}),
		recovered: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_notices_recovered_total", Help: "Notices the sweep stored from their outbox rows because Kafka lost them (a broker that forgot acknowledged messages)."}),
		storeLag: f.NewHistogram(prometheus.HistogramOpts{
			Name: "bidgate_notice_store_lag_seconds", Help: "From a notice's cause (its store's time) to the notice stored.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
	for _, t := range bidgate.NoticeTypes {
		m.stored.WithLabelValues(string(t))
	}
	return m
}
