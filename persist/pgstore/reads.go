package pgstore

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"bidgate"
)

var (
	//go:embed sql/primary_wal_position.sql
	primaryWALPositionSQL string
	//go:embed sql/replica_wal_position.sql
	replicaWALPositionSQL string
)

// ReadConfig says where a read replica (a streaming standby of the
// primary) is and how stale its answers may be.
type ReadConfig struct {
	URL           string        // the standby's connection URL; empty: every read on the primary
	MaxConns      int           // the standby pool's size, at most MaxConnsLimit
	MaxLag        time.Duration // past it, reads go to the primary
	CheckInterval time.Duration // how often the lag is measured
	CheckTimeout  time.Duration // bound of one measurement; past it the standby counts as down
	ReadTimeout   time.Duration // bound of one read on the standby; past it the read goes to the primary
}

// DefaultReadConfig is the one statement of the read replica defaults:
// OpenReads fills a zero field from it, and the command line's flags take
// theirs from it.
func DefaultReadConfig() ReadConfig {
	return ReadConfig{MaxConns: 8, MaxLag: time.Second, CheckInterval: 250 * time.Millisecond,
		CheckTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond}
}

// withDefaults returns c with every zero field taken from DefaultReadConfig.
func (c ReadConfig) withDefaults() ReadConfig {
	d := DefaultReadConfig()
	c.MaxConns = cmp.Or(c.MaxConns, d.MaxConns)
	c.MaxLag = cmp.Or(c.MaxLag, d.MaxLag)
	c.CheckInterval = cmp.Or(c.CheckInterval, d.CheckInterval)
	c.CheckTimeout = cmp.Or(c.CheckTimeout, d.CheckTimeout)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, d.ReadTimeout)
	return c
}

// Validate reports the settings OpenReads cannot use, zero fields
// included (the command line's flags start from DefaultReadConfig).
func (c ReadConfig) Validate() error {
	var errs []error
	if c.MaxConns < 1 || c.MaxConns > MaxConnsLimit {
		errs = append(errs, fmt.Errorf("MaxConns must be from 1 to %d, got %d", MaxConnsLimit, c.MaxConns))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MaxLag", c.MaxLag}, {"CheckInterval", c.CheckInterval}, {"CheckTimeout", c.CheckTimeout}, {"ReadTimeout", c.ReadTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	if c.URL != "" {
		if _, err := pgxpool.ParseConfig(c.URL); err != nil {
			errs = append(errs, fmt.Errorf("URL cannot be parsed: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pgstore: read replica: %w", err)
	}
	return nil
}

// Where a read went, and why one that could have gone to the standby did
// not (the label values of the metrics).
const (
	SourceReplica = "replica"
	SourcePrimary = "primary"

	FallbackLag      = "lag"       // the standby was past MaxLag, or its lag unknown
	FallbackDown     = "down"      // the last measurement did not reach it
	FallbackError    = "error"     // the read failed or timed out on it
	FallbackNotFound = "not_found" // it lacked the row: maybe not replayed yet
)

// The standby's state, as the last measurement (or a failed read) left it.
const (
	replicaUnchecked int32 = iota - 1 // until the first measurement: as down
	replicaDown
	replicaLagging
	replicaUsable
)

// Reads chooses where reads that need PostgreSQL go: a streaming standby
// while it answers and is within MaxLag of the primary, else the primary.
// A read never fails because of the standby: one that fails there, or
// finds nothing there (the row may not be replayed yet: a read right after
// its write), is run again on the primary. Writes, and every read a
// decision depends on, use the primary's Store directly, never this.
type Reads struct {
	primary *Store
	replica *pgxpool.Pool // nil: no standby configured
	cfg     ReadConfig
	log     *slog.Logger

	state atomic.Int32 // replicaUnchecked, replicaDown, replicaLagging, replicaUsable
	// failedReads counts reads the standby failed: a measurement that
	// started before one must not declare the standby usable again.
	failedReads atomic.Uint64

	mu  sync.Mutex // one measurement at a time
	lag lagTracker

	lagSeconds prometheus.Gauge
	fallbacks  *prometheus.CounterVec
	served     *prometheus.CounterVec
}

// OpenReads returns the read chooser on primary, with a pool on cfg.URL's
// standby when one is set, and its metrics on reg. A standby that does not
// answer yet is no error: reads go to the primary until it does. It
// measures the standby once before it returns; Run keeps measuring.
func OpenReads(ctx context.Context, primary Querier, cfg ReadConfig, reg prometheus.Registerer, log *slog.Logger) (*Reads, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Reads{primary: &Store{DB: primary}, cfg: cfg, log: cmp.Or(log, slog.Default())}
	f := promauto.With(reg)
	r.lagSeconds = f.NewGauge(prometheus.GaugeOpts{
		Name: "bidgate_read_replica_lag_seconds",
		Help: "How far the read replica's data is behind the primary's, measured by WAL position (0 without a replica).",
	})
	r.fallbacks = f.NewCounterVec(prometheus.CounterOpts{
		Name: "bidgate_read_replica_fallbacks_total",
		Help: "Reads sent to the primary although a read replica is configured, by reason (lag, down, error, not_found).",
	}, []string{"reason"})
	r.served = f.NewCounterVec(prometheus.CounterOpts{
		Name: "bidgate_reads_total",
		Help: "Reads of the read path by the server that answered them (replica, primary).",
	}, []string{"source"})
	r.served.WithLabelValues(SourcePrimary)
	if cfg.URL == "" {
		return r, nil
	}
	r.served.WithLabelValues(SourceReplica)
	for _, reason := range []string{FallbackLag, FallbackDown, FallbackError, FallbackNotFound} {
		r.fallbacks.WithLabelValues(reason)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse the read replica URL: %w", err)
	}
	pcfg.MaxConns = int32(cfg.MaxConns)
	serial(pcfg)
	if r.replica, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("read replica pool: %w", err)
	}
	r.log = r.log.With("replica", fmt.Sprintf("%s:%d", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port))
	r.state.Store(replicaUnchecked)
	r.check(ctx)
	return r, nil
}

// Close closes the standby's pool (not the primary's).
func (r *Reads) Close() {
	if r.replica != nil {
		r.replica.Close()
	}
}

// Run measures the standby's lag every CheckInterval until ctx ends.
// Without a standby it returns at once.
func (r *Reads) Run(ctx context.Context) error {
	if r.replica == nil {
		return nil
	}
	t := time.NewTicker(r.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.check(ctx)
		}
	}
}

// Auction reads one auction, as Store.Auction does, from the standby when
// it may serve.
func (r *Reads) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	var a bidgate.Auction
	err := r.Do(ctx, func(ctx context.Context, s *Store) error {
		var err error
		a, err = s.Auction(ctx, id)
		return err
	})
	return a, err
}

// Do runs read on the standby when it may serve, within ReadTimeout, and
// again on the primary when it fails there or finds nothing
// (bidgate.ErrAuctionNotFound, bidgate.ErrNoticeNotFound, pgx.ErrNoRows);
// otherwise on the primary.
// read must only read, and must use the context it is given.
func (r *Reads) Do(ctx context.Context, read func(context.Context, *Store) error) error {
	reason := r.fallbackReason()
	if reason == "" {
		rctx, cancel := context.WithTimeout(ctx, r.cfg.ReadTimeout)
		err := read(rctx, &Store{DB: r.replica})
		cancel()
		switch {
		case err == nil:
			r.served.WithLabelValues(SourceReplica).Inc()
			return nil
		case ctx.Err() != nil:
			return err // the caller gave up: the primary would not be asked either
		case errors.Is(err, bidgate.ErrAuctionNotFound) || errors.Is(err, bidgate.ErrNoticeNotFound) || errors.Is(err, pgx.ErrNoRows):
			reason = FallbackNotFound
		default:
			reason = FallbackError
			r.failedReads.Add(1)
			if r.state.CompareAndSwap(replicaUsable, replicaDown) {
				r.log.Warn("read replica failed a read: reads go to the primary until its next good lag check", "err", err)
			}
		}
	}
	if reason != "-" {
		r.fallbacks.WithLabelValues(reason).Inc()
	}
	r.served.WithLabelValues(SourcePrimary).Inc()
	return read(ctx, r.primary)
}

// Querier is the pool a read should go to now: the standby while it may
// serve, else the primary. A caller of it has no fallback when the
// standby then fails or lacks a row; Do has.
func (r *Reads) Querier() Querier {
	if r.fallbackReason() == "" {
		return r.replica
	}
	return r.primary.DB
}

// fallbackReason is "" when the standby may serve, "-" when there is none,
// else why the primary must.
func (r *Reads) fallbackReason() string {
	if r.replica == nil {
		return "-"
	}
	switch r.state.Load() {
	case replicaUsable:
		return ""
	case replicaLagging:
		return FallbackLag
	}
	return FallbackDown
}

// check measures the standby's lag: the primary's WAL position first, then
// the position the standby has replayed. Time is measured on this node's
// monotonic clock between measurements, never by comparing the two
// servers' clocks, and a standby that is caught up reads 0 whether or not
// the primary is being written.
func (r *Reads) check(parent context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(parent, r.cfg.CheckTimeout)
	defer cancel()
	failed := r.failedReads.Load()
	var primaryPos int64
	if err := r.primary.DB.QueryRow(ctx, primaryWALPositionSQL).Scan(&primaryPos); err != nil {
		if parent.Err() != nil {
			return
		}
		// Without the primary's position the lag is unknown.
		r.setState(replicaLagging, "cannot read the primary's WAL position", err)
		return
	}
	at := time.Now()
	var (
		standby  bool
		replayed *int64
	)
	if err := r.replica.QueryRow(ctx, replicaWALPositionSQL).Scan(&standby, &replayed); err != nil {
		if parent.Err() != nil {
			return // stopping, not a verdict on the standby
		}
		r.setState(replicaDown, "read replica does not answer", err)
		return
	}
	if !standby || replayed == nil {
		r.setState(replicaDown, "read replica is not a standby (promoted?)", nil)
		return
	}
	lag, known := r.lag.observe(at, primaryPos, *replayed)
	r.lagSeconds.Set(lag.Seconds())
	if !known || lag > r.cfg.MaxLag {
		r.setState(replicaLagging, "read replica lags: reads go to the primary", nil, "lag", lag, "max", r.cfg.MaxLag)
		return
	}
	if r.failedReads.Load() != failed {
		return // a read failed there meanwhile: the next measurement decides
	}
	r.setState(replicaUsable, "read replica serves reads", nil, "lag", lag)
}

// setState records the standby's state, logging a change only.
func (r *Reads) setState(s int32, msg string, err error, attrs ...any) {
	if r.state.Swap(s) == s {
		return
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	if s == replicaUsable {
		r.log.Info(msg, attrs...)
		return
	}
	r.log.Warn(msg, attrs...)
}
