package persist

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
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
	"bidgate/internal/retry"
	pkafka "bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Reader is the part of a Kafka consumer-group reader the persister uses;
// *kafka.Reader is one.
type Reader interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
}

// PersisterConfig tunes a Persister. Zero values take
// DefaultPersisterConfig's.
type PersisterConfig struct {
	MaxBatch int           // messages per transaction
	MaxWait  time.Duration // how long a batch waits to fill after its first message
	// Verifier checks every message's signature against the event-verifying
	// keys; a message that fails is dropped and counted. Nil verifies
	// nothing (an insecure cluster).
	Verifier *pkafka.Verifier
	Log      *slog.Logger
}

// DefaultPersisterConfig is the one statement of the persister's defaults:
// NewPersister fills a zero field from it. A batch waits 60 ms: every node
// persists its share of the partitions, and with 20 ms three nodes wrote a
// flash sale's bids in three times one node's transactions, each a commit
// PostgreSQL pays for (a bid is in Redis, acknowledged, long before).
func DefaultPersisterConfig() PersisterConfig {
	return PersisterConfig{MaxBatch: 1000, MaxWait: 60 * time.Millisecond, Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from
// DefaultPersisterConfig.
func (c PersisterConfig) withDefaults() PersisterConfig {
	d := DefaultPersisterConfig()
	c.MaxBatch = cmp.Or(c.MaxBatch, d.MaxBatch)
	c.MaxWait = cmp.Or(c.MaxWait, d.MaxWait)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Persister writes the bids of bid-accepted to PostgreSQL, one transaction
// per fetched batch, and commits the Kafka offsets only after that
// transaction committed: a crash in between redelivers the batch, and the
// unique key on (auction_id, request_id) makes the second write a no-op.
// Several persisters in one consumer group share the partitions.
//
// Kafka is a transport here, never the record: what a broker loses, the
// Reconciler finds missing and writes from the Redis log, and what a
// message says is written only when the Redis log says the same
// (checkAgainstLog), so a validly signed message cannot replace a bid.
// While Redis does not answer, batches wait.
//
// A new row that took the lead brings its outbid notice: stored in the
// row's transaction (so as durable as the bid, and no trip through the
// outbox, Kafka and the notifier), then pushed to its user.
type Persister struct {
	db      *pgxpool.Pool
	rdb     *redisstore.Store
	r       Reader
	cfg     PersisterConfig
	metrics *persisterMetrics
	// rejectLog and conflictLog log dropped messages at most every 10 s
	// each: a flood of forged messages must not become a flood of log lines.
	rejectLog, conflictLog rate.Sometimes
	noticeLog              rate.Sometimes // failed pushes of notices

	// afterInsert, when set (tests), runs after the transaction committed
	// and before the offsets are; an error stops Run there.
	afterInsert func() error
}

// NewPersister returns a Persister reading r, metrics on reg.
func NewPersister(db *pgxpool.Pool, rdb redis.UniversalClient, r Reader, cfg PersisterConfig, reg prometheus.Registerer) *Persister {
	cfg = cfg.withDefaults()
	return &Persister{db: db, rdb: redisstore.New(rdb), r: r, cfg: cfg, metrics: newPersisterMetrics(reg),
		rejectLog: rate.Sometimes{Interval: 10 * time.Second}, conflictLog: rate.Sometimes{Interval: 10 * time.Second},
		noticeLog: rate.Sometimes{Interval: 10 * time.Second}}
}

// Run persists batches until ctx ends, and returns nil then. Nothing stops
// it before: a Kafka or PostgreSQL failure is retried for ever after a
// back-off, a failed write with the same batch, and nothing is committed to
// Kafka until its batch is in PostgreSQL.
func (p *Persister) Run(ctx context.Context) error {
	return consume(ctx, p.r, consumer{task: "persist bids from Kafka", what: "bids", maxBatch: p.cfg.MaxBatch,
		maxWait: p.cfg.MaxWait, log: p.cfg.Log, kafkaErrors: p.metrics.errors.WithLabelValues("kafka"),
		handle: p.persist, handled: p.afterInsert})
}

// consumer is what a consume loop needs: its name and batching, and what to
// do with a batch.
type consumer struct {
	task, what  string // for the logs: "persist bids from Kafka", "bids"
	maxBatch    int
	maxWait     time.Duration
	log         *slog.Logger
	kafkaErrors prometheus.Counter
	handle      func(context.Context, []kafka.Message) error
	handled     func() error // nil, or a hook (tests) between handling and committing
}

// consume is the at-least-once loop of the consumers (persister, notifier):
// fetch a batch, handle it until that succeeds (the same batch after a
// failure, after a back-off), and only then commit its offsets, so a crash
// in between delivers it again. It returns nil when ctx ends.
func consume(ctx context.Context, r Reader, c consumer) error {
	var pending []kafka.Message // fetched, not yet handled: handled again after a failure
	loop := retry.Loop{Task: c.task, Log: c.log}
	return loop.Run(ctx, func(ctx context.Context) (bool, error) {
		if pending == nil {
			msgs, err := fetchBatch(ctx, r, c.maxBatch, c.maxWait)
			if err != nil && len(msgs) == 0 {
				c.kafkaErrors.Inc()
				return false, fmt.Errorf("fetch %s from Kafka: %w", c.what, err)
			}
			pending = msgs
		}
		if err := c.handle(ctx, pending); err != nil {
			return false, fmt.Errorf("%s: %d messages: %w", c.task, len(pending), err)
		}
		if c.handled != nil {
			if err := c.handled(); err != nil {
				return false, fmt.Errorf("%w: %w", retry.ErrStop, err)
			}
		}
		msgs := pending
		pending = nil
		if err := r.CommitMessages(ctx, msgs...); err != nil && ctx.Err() == nil {
			c.kafkaErrors.Inc()
			return false, fmt.Errorf("commit offsets: %w", err)
		}
		return true, nil // the next fetch waits for messages
	})
}

// fetchBatch waits for one message, then takes what follows within wait,
// up to max. An error after the first message ends the batch early; the
// error comes back with the messages already fetched.
func fetchBatch(ctx context.Context, r Reader, max int, wait time.Duration) ([]kafka.Message, error) {
	first, err := r.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	msgs := []kafka.Message{first}
	fill, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(msgs) < max {
		m, err := r.FetchMessage(fill)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				break
			}
			return msgs, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// persist writes one batch in one transaction, then records in Redis how far
// each auction's bids are in PostgreSQL without a gap (the relay re-feeds
// from there, the reconciler trims the log up to there).
func (p *Persister) persist(ctx context.Context, msgs []kafka.Message) error {
	start := time.Now()
	checked := make([]message, 0, len(msgs))
	fetch := p.cfg.Verifier.Fetch()
	for _, m := range msgs {
		// A message no bidgate relay wrote is skipped, loudly, rather than
		// written or left to block the partition for ever.
		if !fetch.Verify(m) {
			p.reject("signature", m, errors.New("bad or missing signature"))
			continue
		}
		// json v2: half encoding/json's time per message, one allocation
		// instead of ten; it also refuses duplicate names and bad UTF-8.
		var b bidgate.BidAccepted
		err := json.Unmarshal(m.Value, &b)
		if err == nil {
			err = b.Validate()
		}
		if err == nil && string(m.Key) != strconv.FormatInt(b.AuctionID, 10) {
			err = errors.New("key is not the bid's auction")
		}
		if err != nil {
			p.reject("malformed", m, err)
			continue
		}
		checked = append(checked, message{bid: b, m: m})
	}
	bids, err := p.checkAgainstLog(ctx, checked)
	if err != nil {
		return fmt.Errorf("check bids against the Redis log: %w", err)
	}
	if len(bids) == 0 {
		return nil
	}
	var w pgstore.HotWrite
	err = pgstore.InTx(ctx, p.db, func(tx pgx.Tx) (err error) {
		w, err = pgstore.WriteHotBids(ctx, tx, bids, pgstore.StoreOutbidNotices)
		return err
	})
	if err != nil {
		p.metrics.errors.WithLabelValues("postgres").Inc()
		return err
	}
	p.push(ctx, w.Notices)
	if err := p.recordPersisted(ctx, w.Positions); err != nil {
		// Only re-feeding and trimming wait on this; the reconciler records
		// the positions again.
		p.cfg.Log.Warn("recording persisted positions in Redis failed", "auctions", len(w.Positions), "err", err)
	}
	p.metrics.persisted.Add(float64(len(bids)))
	p.metrics.batchDuration.Observe(time.Since(start).Seconds())
	p.metrics.batchSize.Observe(float64(len(msgs)))
	return nil
}

// push counts the outbid notices the batch stored and sends them to their
// users' channels, best effort: a user not listening, or listening while
// Redis fails, reads them from the list.
func (p *Persister) push(ctx context.Context, notices []bidgate.Notice) {
	if len(notices) == 0 {
		return
	}
	now := time.Now()
	for _, n := range notices {
		p.metrics.noticeLag.Observe(now.Sub(n.At).Seconds())
	}
	p.metrics.notices.Add(float64(len(notices)))
	if err := p.rdb.PublishNotices(ctx, notices); err != nil {
		p.metrics.errors.WithLabelValues("redis").Inc()
		p.noticeLog.Do(func() {
			p.cfg.Log.Warn("publishing outbid notices failed; their users read them from the list (logged at most every 10s)",
				"notices", len(notices), "err", err)
		})
	}
}

// reject counts a dropped message and logs it, rate-limited.
func (p *Persister) reject(reason string, m kafka.Message, err error) {
	p.metrics.rejected.WithLabelValues(reason).Inc()
	p.rejectLog.Do(func() {
		p.cfg.Log.Error("dropped bid-accepted messages bidgate did not write (logged at most every 10s; see bidgate_persister_rejected_messages_total)",
			"reason", reason, "partition", m.Partition, "offset", m.Offset, "err", err)
	})
}

// recordPersisted raises each auction's persisted position in Redis to what
// PostgreSQL holds.
func (p *Persister) recordPersisted(ctx context.Context, positions map[int64]int64) error {
	recs := make([]redisstore.Persisted, 0, len(positions))
	for id, pos := range positions {
		recs = append(recs, redisstore.Persisted{AuctionID: id, Seq: pos})
	}
	return p.rdb.RecordPersisted(ctx, recs)
}

type persisterMetrics struct {
	persisted                prometheus.Counter
	rejected, conflicts      *prometheus.CounterVec
	errors                   *prometheus.CounterVec
	batchSize, batchDuration prometheus.Histogram
	notices                  prometheus.Counter
	noticeLag                prometheus.Histogram
}

func newPersisterMetrics(reg prometheus.Registerer) *persisterMetrics {
	f := promauto.With(reg)
	m := &persisterMetrics{
		persisted: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_persister_bids_total", Help: "Hot bids written to PostgreSQL (duplicates skipped by the unique key included)."}),
		rejected: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_persister_rejected_messages_total", Help: "bid-accepted messages dropped unwritten, by reason: signature (not signed by an event-verifying key) or malformed."}, []string{"reason"}),
		conflicts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_persister_conflicts_total", Help: "Validly signed bid-accepted messages refused because they are not the bid the Redis log (or PostgreSQL's row) holds for their seq, by reason: no_bid (Redis accepted none), log (the log's entry was written instead), row, duplicated. Should always be 0."}, []string{"reason"}),
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_persister_errors_total", Help: "Persister failures, retried, by the dependency that failed (kafka, redis, postgres)."},
			[]string{"dependency"}),
		batchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name: "bidgate_persister_batch_size", Help: "Messages per persister transaction.",
			Buckets: []float64{1, 10, 50, 100, 250, 500, 1000, 2000}}),
		batchDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name: "bidgate_persister_batch_duration_seconds", Help: "Time to write one batch to PostgreSQL.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12)}),
		notices: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_persister_notices_stored_total", Help: "Outbid notices stored with their hot rows (each once); the notifier's bidgate_notices_stored_total counts the others."}),
		noticeLag: f.NewHistogram(prometheus.HistogramOpts{
			Name: "bidgate_persister_notice_lag_seconds", Help: "From a hot bid's acceptance (Redis time) to the outbid notice it caused stored with its row.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
	return m
}
