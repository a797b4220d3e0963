package persist

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"bidgate"
	"bidgate/internal/retry"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// ReconcilerConfig tunes a Reconciler. Zero values take
// DefaultReconcilerConfig's.
type ReconcilerConfig struct {
	Interval time.Duration // between passes
	// RepairAfter is how old, in Redis time, the oldest bid missing from
	// PostgreSQL may get before the reconciler writes it from the Redis log
	// itself instead of waiting for Kafka.
	RepairAfter time.Duration
	Batch       int           // log entries read per auction per step
	Linger      time.Duration // how long after closing an auction is still checked
	// Lease is how long a reconciler keeps the cluster's passes after its
	// last one: one runs them at a time, another takes over after this.
	Lease time.Duration
	// Replication, when it asks for replicas (--redis-wait-replicas),
	// makes the reconciler hand on only log entries the replicas hold: an entry
	// whose batch was never acknowledged is gone after a failover.
	Replication redisstore.Replication
	Log         *slog.Logger
}

// DefaultReconcilerConfig is the one statement of the reconciler's
// defaults: NewReconciler fills a zero field from it.
func DefaultReconcilerConfig() ReconcilerConfig {
	return ReconcilerConfig{Interval: time.Second, RepairAfter: 10 * time.Second, Batch: 1000, Linger: time.Hour,
		Lease: 5 * time.Second, Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from
// DefaultReconcilerConfig.
func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	d := DefaultReconcilerConfig()
	c.Interval = cmp.Or(c.Interval, d.Interval)
	c.RepairAfter = cmp.Or(c.RepairAfter, d.RepairAfter)
	c.Batch = cmp.Or(c.Batch, d.Batch)
	c.Linger = cmp.Or(c.Linger, d.Linger)
	c.Lease = cmp.Or(c.Lease, d.Lease)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Reconciler makes sure that every bid a hot auction accepted reaches
// PostgreSQL, whatever Kafka did with it. For every hot auction that is
// open or recently closed it compares Redis's seq with PostgreSQL's
// persisted position (every bid up to it is in the bid table), writes the
// missing bids from the auction's Redis log once the oldest of them is older
// than RepairAfter, records the positions for the relay, and trims each log
// up to its position, only past rows that are the log's entries (a row of
// another bid keeps the log, and is counted and logged). It exports how many bids are accepted but not yet in
// PostgreSQL, and the age of the oldest: what an operator alerts on.
//
// Any number of reconcilers may run at once: writes go through WriteHotBids,
// which skips bids already there and serializes per auction. Run still
// makes them take turns (a lease in Redis): each pass reads every hot
// auction's log, and three nodes reading the same logs cost three times
// the CPU for nothing.
type Reconciler struct {
	db      *pgxpool.Pool
	store   *pgstore.Store
	rdb     *redisstore.Store
	cfg     ReconcilerConfig
	holder  string // this reconciler, as the lease names it
	lease   string // the lease of the passes
	metrics *reconcilerMetrics
	// conflictLog says at most once a minute that rows disagree with the
	// logs: the gauge tells how many, every pass.
	conflictLog rate.Sometimes
	// afterPositions, when set (tests), runs between reading the positions
	// and reading the logs: where other writers race a pass.
	afterPositions func()
}

// NewReconciler returns a Reconciler with metrics on reg.
func NewReconciler(db *pgxpool.Pool, rdb redis.UniversalClient, cfg ReconcilerConfig, reg prometheus.Registerer) *Reconciler {
	cfg = cfg.withDefaults()
	return &Reconciler{db: db, store: &pgstore.Store{DB: db}, rdb: redisstore.NewReplicated(rdb, cfg.Replication), cfg: cfg,
		holder: uuid.NewString(), lease: leaseOf(db), metrics: newReconcilerMetrics(reg), conflictLog: rate.Sometimes{Interval: time.Minute}}
}

// leaseOf names the lease of the reconcilers' passes on db: one per
// database, so that deployments (and test stacks) that share a Redis do
// not share it.
func leaseOf(db *pgxpool.Pool) string {
	c := db.Config().ConnConfig
	return fmt.Sprintf("reconciler:%s:%d/%s", c.Host, c.Port, c.Database)
}

// Run reconciles until ctx ends, then returns nil; failures back off and
// retry. It runs a pass only while it holds the reconcilers' lease (taken
// or renewed before each pass); without it the gauges read 0 (the holder
// reports the whole: alert on max), and it gives the lease up on return.
func (r *Reconciler) Run(ctx context.Context) error {
	defer r.release()
	loop := retry.Loop{Task: "reconcile hot bids", Interval: r.cfg.Interval, Log: r.cfg.Log,
		OnError: func(error) { r.metrics.errors.Inc() }}
	return loop.Run(ctx, func(ctx context.Context) (bool, error) {
		held, err := r.rdb.HoldLease(ctx, r.lease, r.holder, r.cfg.Lease)
		if err != nil {
			return false, err
		}
		if !held {
			r.metrics.holder.Set(0)
			r.metrics.observe(Reconciliation{})
			return false, nil
		}
		r.metrics.holder.Set(1)
		res, err := r.ReconcileOnce(ctx)
		return res.Repaired > 0 || res.TrimBacklog, err
	})
}

// release gives the lease up, so that another reconciler goes on at once.
func (r *Reconciler) release() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.rdb.ReleaseLease(ctx, r.lease, r.holder); err != nil {
		r.cfg.Log.Warn("reconciler: give the lease up (another takes it when it expires)", "err", err)
	}
	r.metrics.holder.Set(0)
}

// Reconciliation is what one pass found and did.
type Reconciliation struct {
	Auctions    int           // hot auctions looked at
	Unpersisted int64         // bids accepted in Redis and not yet in PostgreSQL
	Oldest      time.Duration // age of the oldest of them, in Redis time
	Repaired    int64         // bids this pass wrote to PostgreSQL from the logs
	Missing     int64         // unpersisted bids the Redis logs no longer hold: lost
	// TrimBacklog: some log's head held nothing but persisted entries, so
	// the next pass trims further at once.
	TrimBacklog bool
	// Conflicting counts log entries whose seq PostgreSQL holds with
	// another bid: the log keeps them (it is not trimmed past them) and
	// an operator decides.
	Conflicting int64
}

// logHead is one auction as a pass sees it.
type logHead struct {
	id        int64
	persisted int64               // PostgreSQL's position
	seq       int64               // Redis's: bids accepted
	first     redisstore.StreamID // the first log entry past persisted; zero if not read
	firstSeq  int64
	firstUs   int64 // its acceptance time
	// recheck is PostgreSQL's position read again after the log, where the
	// log starts past persisted + 1 (confirmGaps); 0 otherwise.
	recheck int64
	trimTo  redisstore.StreamID // log entries before this id are persisted, as the log says
	trimAll bool                // every entry read was persisted: more may follow
	// done are the entries read at or below persisted: trimmed once
	// PostgreSQL's rows are found to be them (checkTrim).
	done []bidgate.BidAccepted
}

// ReconcileOnce does one pass.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (Reconciliation, error) {
	var res Reconciliation
	positions, err := r.store.HotPositions(ctx, r.cfg.Linger)
	if err != nil {
		return res, err
	}
	heads := make([]*logHead, len(positions))
	for i, p := range positions {
		heads[i] = &logHead{id: p.AuctionID, persisted: p.Seq}
	}
	res.Auctions = len(heads)
	if len(heads) == 0 {
		r.metrics.observe(res)
		return res, nil
	}
	if r.afterPositions != nil {
		r.afterPositions()
	}
	now, err := r.look(ctx, heads)
	if err != nil {
		return res, err
	}
	if res.Conflicting, err = r.checkTrim(ctx, heads); err != nil {
		return res, err
	}
	for _, h := range heads {
		res.TrimBacklog = res.TrimBacklog || h.trimAll
	}
	if err := r.confirmGaps(ctx, heads); err != nil {
		return res, err
	}
	var due []*logHead
	for _, h := range heads {
		if h.seq <= h.persisted {
			continue
		}
		res.Unpersisted += h.seq - h.persisted
		switch {
		case h.first == (redisstore.StreamID{}):
			continue // the next pass reads further
		case h.firstSeq > max(h.persisted, h.recheck)+1:
			persisted := max(h.persisted, h.recheck)
			res.Missing += h.firstSeq - persisted - 1
			r.cfg.Log.Error("accepted bids are neither in PostgreSQL nor in the Redis log",
				"auction", h.id, "persisted_seq", persisted, "first_log_seq", h.firstSeq)
		}
		age := time.Duration(now-h.firstUs) * time.Microsecond
		res.Oldest = max(res.Oldest, age)
		if age >= r.cfg.RepairAfter {
			due = append(due, h)
		}
	}
	if len(due) > 0 {
		n, err := r.repair(ctx, due)
		res.Repaired = n
		if err != nil {
			r.metrics.observe(res)
			return res, err
		}
	}
	err = r.record(ctx, heads)
	r.metrics.observe(res)
	return res, err
}

// look reads Redis's time and, per auction, its seq and the head of its
// log (up to cfg.Batch entries), in one round trip; it returns Redis's time
// in microseconds.
func (r *Reconciler) look(ctx context.Context, heads []*logHead) (int64, error) {
	ids := make([]int64, len(heads))
	for i, h := range heads {
		ids[i] = h.id
	}
	now, found, err := r.rdb.Heads(ctx, ids, r.cfg.Batch)
	if err != nil {
		return 0, err
	}
	for i, h := range heads {
		if !found[i].Found {
			continue // no state in Redis: no hot bid to miss
		}
		h.seq = found[i].Seq
		h.trimAll = len(found[i].Entries) == r.cfg.Batch
		for _, b := range found[i].Entries {
			sid, err := redisstore.ParseStreamID(b.StreamID)
			if err != nil {
				return 0, fmt.Errorf("auction %d: %w", h.id, err)
			}
			if b.Seq <= h.persisted {
				h.done = append(h.done, b)
				continue
			}
			h.first, h.firstSeq, h.firstUs = sid, b.Seq, b.AcceptedAt.UnixMicro()
			h.trimAll = false
			break
		}
	}
	return now, nil
}

// confirmGaps reads again (recheck) the positions of the auctions whose log
// starts past their persisted position + 1. The positions
// were read before the logs, and meanwhile the persister may have written
// more and another reconciler trimmed the logs past them: a gap in that
// stale view is no loss. A log is trimmed only past persisted rows, so a
// position read after the log shows every trimmed entry; a gap still there
// is bids lost.
func (r *Reconciler) confirmGaps(ctx context.Context, heads []*logHead) error {
	var gaps []int64
	for _, h := range heads {
		if h.first != (redisstore.StreamID{}) && h.firstSeq > h.persisted+1 {
			gaps = append(gaps, h.id)
		}
	}
	if len(gaps) == 0 {
		return nil
	}
	now, err := r.store.PersistedPositions(ctx, gaps)
	if err != nil {
		return err
	}
	for _, h := range heads {
		h.recheck = now[h.id]
	}
	return nil
}

// checkTrim sets each log's trim point: past its persisted entries up to
// the first whose row in PostgreSQL is not that entry. A log is the record
// of its auction's bids, so it is trimmed only past rows that match it. It
// returns how many entries have a row of another bid, and logs them.
func (r *Reconciler) checkTrim(ctx context.Context, heads []*logHead) (int64, error) {
	var done []bidgate.BidAccepted
	for _, h := range heads {
		done = append(done, h.done...)
	}
	rows, err := pgstore.CompareBids(ctx, r.db, done)
	if err != nil {
		return 0, err
	}
	var conflicting int64
	var first bidgate.BidAccepted
	i := 0
	for _, h := range heads {
		matching := true
		for _, b := range h.done {
			switch {
			case rows[i] == pgstore.RowDifferent:
				if conflicting == 0 {
					first = b
				}
				conflicting++
				fallthrough
			case rows[i] != pgstore.RowSame:
				matching, h.trimAll = false, false
			case matching:
				sid, err := redisstore.ParseStreamID(b.StreamID)
				if err != nil {
					return 0, fmt.Errorf("auction %d: %w", h.id, err)
				}
				h.trimTo = sid.Next()
			}
			i++
		}
	}
	if conflicting > 0 {
		r.conflictLog.Do(func() {
			r.cfg.Log.Error("bids in PostgreSQL are not the ones the Redis log holds for their seqs; the log keeps those entries (logged at most every minute; see bidgate_reconciler_conflicting_bids)",
				"bids", conflicting, "first_auction", first.AuctionID, "first_seq", first.Seq)
		})
	}
	return conflicting, nil
}

// repair writes the unpersisted bids of the due auctions from their logs,
// one transaction per step of up to cfg.Batch entries each, and returns how
// many were new to PostgreSQL.
func (r *Reconciler) repair(ctx context.Context, due []*logHead) (int64, error) {
	var repaired int64
	for len(due) > 0 {
		ranges := make([]redisstore.LogRange, len(due))
		for i, h := range due {
			ranges[i] = redisstore.LogRange{AuctionID: h.id, From: h.first}
		}
		logs, err := r.rdb.ReadLogs(ctx, ranges, r.cfg.Batch)
		if err != nil {
			return repaired, err
		}
		if err := r.rdb.WaitReplicated(ctx, withEntries(ranges, logs)...); err != nil {
			return repaired, err
		}
		var bids []bidgate.BidAccepted
		var more []*logHead
		for i, h := range due {
			bids = append(bids, logs[i]...)
			if n := len(logs[i]); n == r.cfg.Batch {
				last, err := redisstore.ParseStreamID(logs[i][n-1].StreamID)
				if err != nil {
					return repaired, fmt.Errorf("auction %d: %w", h.id, err)
				}
				h.first = last.Next()
				more = append(more, h)
			}
		}
		var positions map[int64]int64
		var inserted int64
		err = pgstore.InTx(ctx, r.db, func(tx pgx.Tx) (err error) {
			w, err := pgstore.WriteHotBids(ctx, tx, bids, pgstore.QueueOutbidNotices)
			positions, inserted = w.Positions, w.Inserted
			return err
		})
		if err != nil {
			return repaired, fmt.Errorf("write %d bids from the logs: %w", len(bids), err)
		}
		repaired += inserted
		r.metrics.repaired.Add(float64(inserted))
		if inserted > 0 {
			r.cfg.Log.Warn("wrote bids missing from PostgreSQL from the Redis logs", "bids", inserted,
				"auctions", len(due), "older_than", r.cfg.RepairAfter)
		}
		for _, h := range due {
			if p, ok := positions[h.id]; ok {
				h.persisted = p
			}
		}
		due = more
	}
	return repaired, nil
}

// record publishes the persisted positions for the relay and trims each log
// up to its position.
func (r *Reconciler) record(ctx context.Context, heads []*logHead) error {
	var positions []redisstore.Persisted
	for _, h := range heads {
		if h.persisted > 0 {
			positions = append(positions, redisstore.Persisted{AuctionID: h.id, Seq: h.persisted, TrimTo: h.trimTo})
		}
	}
	return r.rdb.RecordPersisted(ctx, positions)
}

type reconcilerMetrics struct {
	unpersisted, oldest, missing prometheus.Gauge
	conflicting                  prometheus.Gauge
	holder                       prometheus.Gauge // 1 while this reconciler holds the lease
	repaired, errors             prometheus.Counter
}

func newReconcilerMetrics(reg prometheus.Registerer) *reconcilerMetrics {
	f := promauto.With(reg)
	m := &reconcilerMetrics{
		unpersisted: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_unpersisted_bids", Help: "Hot bids accepted in Redis and not yet in PostgreSQL, over all hot auctions (the reconciler that holds the lease reports the whole, the others 0; alert on max)."}),
		oldest: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_unpersisted_oldest_seconds", Help: "Age, in Redis time, of the oldest hot bid not yet in PostgreSQL."}),
		missing: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_unpersisted_lost_bids", Help: "Accepted hot bids neither in PostgreSQL nor in the Redis log any more: lost (should always be 0)."}),
		conflicting: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_reconciler_conflicting_bids", Help: "Hot bids in PostgreSQL that are not the bid the Redis log holds for their seq, as the last pass found: the log is kept past them (should always be 0)."}),
		holder: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_reconciler_lease_held", Help: "1 while this node's reconciler holds the lease and runs the passes (one node of the cluster at a time)."}),
		repaired: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_reconciler_repaired_bids_total", Help: "Hot bids the reconciler wrote to PostgreSQL from the Redis logs (Kafka lost or delayed them)."}),
		errors: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_reconciler_errors_total", Help: "Reconciler passes that failed (Redis or PostgreSQL)."}),
	}
	return m
}

func (m *reconcilerMetrics) observe(res Reconciliation) {
	m.unpersisted.Set(float64(res.Unpersisted))
	m.oldest.Set(res.Oldest.Seconds())
	m.missing.Set(float64(res.Missing))
	m.conflicting.Set(float64(res.Conflicting))
}
