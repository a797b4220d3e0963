package persist

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/insert_bids.sql
	insertBidsSQL string
	//go:embed sql/raise_auctions.sql
	raiseAuctionsSQL string
)

// Reader is the part of a Kafka consumer-group reader the persister uses;
// *kafka.Reader is one.
type Reader interface {
	FetchMessage(ctx context.Context) (kafka.Message, error)
	CommitMessages(ctx context.Context, msgs ...kafka.Message) error
}

// PersisterConfig tunes a Persister. Zero values take the defaults.
type PersisterConfig struct {
	MaxBatch int           // messages per transaction; default 1000
	MaxWait  time.Duration // how long a batch waits to fill after its first message; default 20ms
	Log      *slog.Logger
}

// Persister writes the bids of bid-accepted to PostgreSQL, one transaction
// per fetched batch, and commits the Kafka offsets only after that
// transaction committed: a crash in between redelivers the batch, and the
// unique key on (auction_id, request_id) makes the second write a no-op.
// Several persisters in one consumer group share the partitions.
type Persister struct {
	db      *pgxpool.Pool
	rdb     redis.UniversalClient
	r       Reader
	cfg     PersisterConfig
	metrics *persisterMetrics

	// afterInsert, when set (tests), runs after the transaction committed
	// and before the offsets are; an error stops Run there.
	afterInsert func() error
}

// NewPersister returns a Persister reading r, metrics on reg.
func NewPersister(db *pgxpool.Pool, rdb redis.UniversalClient, r Reader, cfg PersisterConfig, reg prometheus.Registerer) *Persister {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1000
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 20 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Persister{db: db, rdb: rdb, r: r, cfg: cfg, metrics: newPersisterMetrics(reg)}
}

// Run persists batches until ctx ends. A failed write is retried with the
// same batch after a back-off; nothing is committed to Kafka until it lands.
func (p *Persister) Run(ctx context.Context) error {
	for {
		msgs, err := p.fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fetch bids: %w", err)
		}
		for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
			err = p.persist(ctx, msgs)
			if err == nil || ctx.Err() != nil {
				break
			}
			p.metrics.errors.Inc()
			p.cfg.Log.Warn("persisting bids failed; retrying", "bids", len(msgs), "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if p.afterInsert != nil {
			if err := p.afterInsert(); err != nil {
				return err
			}
		}
		if err := p.r.CommitMessages(ctx, msgs...); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The batch will come again; writing it again is harmless.
			p.cfg.Log.Warn("committing offsets failed", "err", err)
		}
	}
}

// fetch waits for one message, then takes what follows within MaxWait, up
// to MaxBatch.
func (p *Persister) fetch(ctx context.Context) ([]kafka.Message, error) {
	first, err := p.r.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	msgs := []kafka.Message{first}
	fill, cancel := context.WithTimeout(ctx, p.cfg.MaxWait)
	defer cancel()
	for len(msgs) < p.cfg.MaxBatch {
		m, err := p.r.FetchMessage(fill)
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
// each auction's log is persisted (so that the relay may trim it).
func (p *Persister) persist(ctx context.Context, msgs []kafka.Message) error {
	start := time.Now()
	var cols bidColumns
	persisted := map[int64]streamID{}
	for _, m := range msgs {
		var b bidgate.BidAccepted
		if err := json.Unmarshal(m.Value, &b); err != nil || !cols.add(b) {
			// A message no bidgate relay writes: skip it, loudly, rather than
			// block the partition forever.
			p.metrics.skipped.Inc()
			p.cfg.Log.Error("skipping malformed bid-accepted message", "partition", m.Partition, "offset", m.Offset, "err", err)
			continue
		}
		if id, err := parseStreamID(b.StreamID); err == nil && persisted[b.AuctionID].before(id) {
			persisted[b.AuctionID] = id
		}
	}
	if len(cols.auction) > 0 {
		known := map[int64]bool{}
		err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
			// Only auctions this database knows get their position recorded:
			// the others' bids were dropped, not persisted.
			rows, err := tx.Query(ctx, `SELECT id FROM auction WHERE id = ANY($1)`, cols.auction)
			if err != nil {
				return fmt.Errorf("look up auctions: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return fmt.Errorf("look up auctions: %w", err)
			}
			for _, id := range ids {
				known[id] = true
			}
			if _, err := tx.Exec(ctx, insertBidsSQL, cols.auction, cols.bidder, cols.amount, cols.request,
				cols.seq, cols.accepted, cols.end); err != nil {
				return fmt.Errorf("insert bids: %w", err)
			}
			top := cols.highestPerAuction()
			if _, err := tx.Exec(ctx, raiseAuctionsSQL, top.auction, top.amount, top.bidder, top.seq, top.end); err != nil {
				return fmt.Errorf("raise auctions: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for id := range persisted {
			if !known[id] {
				delete(persisted, id)
			}
		}
	}
	pipe := p.rdb.Pipeline()
	for id, sid := range persisted {
		setMaxIDScript.Eval(ctx, pipe, []string{KeysOf(id).Persisted}, sid.String())
	}
	if _, err := pipe.Exec(ctx); err != nil && len(persisted) > 0 {
		// Only trimming waits on this; the next batch records it again.
		p.cfg.Log.Warn("recording persisted positions failed", "auctions", len(persisted), "err", err)
	}
	p.metrics.persisted.Add(float64(len(cols.auction)))
	p.metrics.batchDuration.Observe(time.Since(start).Seconds())
	p.metrics.batchSize.Observe(float64(len(msgs)))
	return nil
}

// bidColumns holds a batch column by column, for unnest.
type bidColumns struct {
	auction, bidder, seq []int64
	amount               []decimal.Decimal
	request              []uuid.UUID
	accepted, end        []time.Time
}

func (c *bidColumns) add(b bidgate.BidAccepted) bool {
	amount, err := bidgate.ParseMoney(b.Amount)
	req, err2 := uuid.Parse(b.RequestID)
	if err != nil || err2 != nil || b.AuctionID <= 0 || b.BidderID <= 0 || b.Seq <= 0 {
		return false
	}
	c.auction, c.bidder, c.seq = append(c.auction, b.AuctionID), append(c.bidder, b.BidderID), append(c.seq, b.Seq)
	c.amount, c.request = append(c.amount, amount), append(c.request, req)
	c.accepted, c.end = append(c.accepted, b.AcceptedAt), append(c.end, b.EndTime)
	return true
}

// highestPerAuction keeps, per auction, the bid with the highest seq: the
// highest amount, the latest end.
func (c *bidColumns) highestPerAuction() bidColumns {
	at := map[int64]int{}
	for i, id := range c.auction {
		if j, ok := at[id]; !ok || c.seq[i] > c.seq[j] {
			at[id] = i
		}
	}
	var top bidColumns
	for _, i := range at {
		top.auction, top.bidder, top.seq = append(top.auction, c.auction[i]), append(top.bidder, c.bidder[i]), append(top.seq, c.seq[i])
		top.amount, top.end = append(top.amount, c.amount[i]), append(top.end, c.end[i])
	}
	return top
}

type persisterMetrics struct {
	persisted, skipped, errors prometheus.Counter
	batchSize, batchDuration   prometheus.Histogram
}

func newPersisterMetrics(reg prometheus.Registerer) *persisterMetrics {
	m := &persisterMetrics{
		persisted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_persister_bids_total", Help: "Hot bids written to PostgreSQL (duplicates skipped by the unique key included)."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_persister_skipped_total", Help: "Malformed bid-accepted messages skipped."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_persister_errors_total", Help: "Batches whose write failed and was retried."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bidgate_persister_batch_size", Help: "Messages per persister transaction.",
			Buckets: []float64{1, 10, 50, 100, 250, 500, 1000, 2000}}),
		batchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "bidgate_persister_batch_duration_seconds", Help: "Time to write one batch to PostgreSQL.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 12)}),
	}
	reg.MustRegister(m.persisted, m.skipped, m.errors, m.batchSize, m.batchDuration)
	return m
}
