// Package shard is the serialization point of each auction. A cold auction's
// bids are decided by one PostgreSQL statement each; a hot auction's by one
// Redis script call per batch of waiting bids. In front of both sit a price
// cache that refuses hopeless bids early and a per-bidder token bucket.
package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/internal/batch"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Config tunes a Service. Zero values take DefaultConfig's.
type Config struct {
	MaxBatch int // bids per hot round trip (1 disables batching), at most MaxBatchLimit
	// HotGather is the least time between two round trips of one hot lane
	// (all hot auctions on a single Redis server, one on a Cluster) while
	// its bids keep coming (batch.Batchers.Gather): at a few hundred bids
	// a second most round trips would otherwise carry one or two bids,
	// each costing bidgate and Redis a round trip. A bid waits at most
	// this long; negative disables.
	HotGather time.Duration
	// MaxQueue is the bids that may wait for a cold auction's turn, or in
	// a hot lane, before 503.
	MaxQueue    int
	BatchIdle   time.Duration // an idle cold auction's or hot lane's goroutine exits after this
	CacheMaxAge time.Duration // price cache entries older than this are ignored
	RateLimit   float64       // bids per second per bidder; negative disables
	RateBurst   int           // token bucket size
	PromoteRate int           // cold bids per second on one node that promote an auction; negative disables
	// StoreTimeout bounds the store calls of one bid (its look-up, its
	// token, its statement or script): past it the bid is answered 503
	// (store_timeout) instead of holding its client. It is well under the
	// forwarder's budget, so that a node that forwarded the bid hears this
	// answer rather than a timeout of its own.
	StoreTimeout time.Duration
	// ColdLockTimeout bounds, inside PostgreSQL, how long the cold bid
	// statement waits for its auction's row lock and runs (lock_timeout and
	// statement_timeout). PostgreSQL then cancels it, so a cold bid answered
	// 503 is never placed later, when the lock is released. Below
	// StoreTimeout, which also covers the look-up before it.
	ColdLockTimeout time.Duration
	// Replication, when Replicas > 0, answers a hot batch's bidders only once
	// that many Redis replicas hold it (else 503), waiting at most its
	// Timeout.
	Replication redisstore.Replication
	Log         *slog.Logger
	// OnHotAccepted, when set, is called after a batch accepted bids on a hot
	// auction (the relay of this process wakes on it).
	OnHotAccepted func(auctionID int64)
	// Reads, when set, serves Auction's read of the row (a read replica's,
	// within its lag bound); nil reads the primary. Bids, creates, cancels
	// and promotions always use the primary.
	Reads *pgstore.Reads
}

// MaxBatchLimit bounds Config.MaxBatch: a batch's script calls block the
// Redis shard while they run.
const MaxBatchLimit = 4096

// DefaultConfig is the one statement of the shard defaults: New fills a
// zero field from it, and the command line's flags take theirs from it.
func DefaultConfig() Config {
	return Config{MaxBatch: 256, HotGather: 5 * time.Millisecond, MaxQueue: 4096, BatchIdle: 2 * time.Second, CacheMaxAge: 300 * time.Millisecond,
		RateLimit: 5, RateBurst: 10, PromoteRate: 20, StoreTimeout: time.Second, ColdLockTimeout: 500 * time.Millisecond, Replication: redisstore.Replication{Timeout: 500 * time.Millisecond},
		Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.MaxBatch = cmp.Or(c.MaxBatch, d.MaxBatch)
	c.HotGather = cmp.Or(c.HotGather, d.HotGather)
	c.MaxQueue = cmp.Or(c.MaxQueue, d.MaxQueue)
	c.BatchIdle = cmp.Or(c.BatchIdle, d.BatchIdle)
	c.CacheMaxAge = cmp.Or(c.CacheMaxAge, d.CacheMaxAge)
	c.RateLimit = cmp.Or(c.RateLimit, d.RateLimit)
	c.RateBurst = cmp.Or(c.RateBurst, d.RateBurst)
	c.PromoteRate = cmp.Or(c.PromoteRate, d.PromoteRate)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, d.StoreTimeout)
	c.ColdLockTimeout = cmp.Or(c.ColdLockTimeout, d.ColdLockTimeout)
	c.Replication.Timeout = cmp.Or(c.Replication.Timeout, d.Replication.Timeout)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Validate reports the settings a Service cannot run with. It checks c as
// it is, zero fields included: the command line's flags start from
// DefaultConfig, so a zero there was asked for.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBatch < 1 || c.MaxBatch > MaxBatchLimit {
		errs = append(errs, fmt.Errorf("MaxBatch must be from 1 to %d, got %d", MaxBatchLimit, c.MaxBatch))
	}
	if c.HotGather == 0 || c.HotGather >= c.StoreTimeout/2 {
		errs = append(errs, fmt.Errorf("HotGather must be below half of StoreTimeout (%v), negative to disable, got %v", c.StoreTimeout, c.HotGather))
	}
	if c.MaxQueue < 1 {
		errs = append(errs, fmt.Errorf("MaxQueue must be positive, got %d", c.MaxQueue))
	}
	if c.RateLimit > 0 && c.RateBurst < 1 {
		errs = append(errs, fmt.Errorf("RateBurst must be at least 1, got %d", c.RateBurst))
	}
	if c.CacheMaxAge <= 0 {
		errs = append(errs, fmt.Errorf("CacheMaxAge must be positive, got %v", c.CacheMaxAge))
	}
	if c.StoreTimeout <= 0 {
		errs = append(errs, fmt.Errorf("StoreTimeout must be positive, got %v", c.StoreTimeout))
	}
	if c.ColdLockTimeout <= 0 || c.ColdLockTimeout >= c.StoreTimeout {
		errs = append(errs, fmt.Errorf("ColdLockTimeout must be positive and below StoreTimeout (%v), got %v", c.StoreTimeout, c.ColdLockTimeout))
	}
	if c.Replication.Replicas > 0 && c.Replication.Timeout >= c.StoreTimeout {
		errs = append(errs, fmt.Errorf("Replication.Timeout must be below StoreTimeout (%v), got %v", c.StoreTimeout, c.Replication.Timeout))
	}
	if c.Replication.Replicas < 0 {
		errs = append(errs, fmt.Errorf("Replication.Replicas must not be negative, got %d", c.Replication.Replicas))
	}
	if c.Replication.Replicas > 0 && c.Replication.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("Replication.Timeout must be positive, got %v", c.Replication.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	return nil
}

// Service places bids and serves auctions.
type Service struct {
	db      *pgxpool.Pool
	rdb     redis.UniversalClient
	rs      *redisstore.Store
	store   *pgstore.Store
	cold    *cold
	hot     *hot
	cache   *priceCache
	limiter *limiter
	heat    *heatMeter
	reads   *pgstore.Reads // nil: the primary
	metrics *metrics
	log     *slog.Logger

	storeTimeout time.Duration // of one bid's store calls

	hotIDs    sync.Map // auction id -> struct{}: known hot (mode only goes COLD -> HOT)
	promoting sync.Map // auction id -> struct{}: automatic promotion under way
}

// New returns a Service on PostgreSQL db and Redis rdb, with metrics on reg.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) *Service {
	cfg = cfg.withDefaults()
	m := newMetrics(reg)
	cache := newPriceCache(cfg.CacheMaxAge)
	rs, store := redisstore.NewReplicated(rdb, cfg.Replication), &pgstore.Store{DB: db}
	pub := &publisher{rs: rs, metrics: m}
	s := &Service{
		db: db, rdb: rdb, rs: rs, store: store, cache: cache, metrics: m,
		cold:    newCold(db, store, cache, pub, cfg, m),
		limiter: newLimiter(rs, cfg.RateLimit, cfg.RateBurst, cfg.StoreTimeout),
		heat:    newHeatMeter(cfg.PromoteRate),
		reads:   cfg.Reads,
		log:     cfg.Log,

		storeTimeout: cfg.StoreTimeout,
	}
	s.hot = &hot{rs: rs, db: db, cache: cache, limiter: s.limiter, metrics: m, onAccepted: cfg.OnHotAccepted}
	s.hot.batches = batch.New(cfg.MaxBatch, cfg.MaxQueue, cfg.BatchIdle, s.hot.runBatch)
	s.hot.batches.Observe = func(n int) { m.batchSize.Observe(float64(n)) }
	s.hot.batches.Timeout = cfg.StoreTimeout
	s.hot.batches.Gather = max(cfg.HotGather, 0)
	return s
}

// CreateAuction validates and stores a new auction: PostgreSQL first, then,
// for a hot one, Redis. Should the Redis write fail the auction still
// exists; the first bid loads it into Redis.
func (s *Service) CreateAuction(ctx context.Context, n bidgate.NewAuction) (bidgate.Auction, error) {
	if err := n.Validate(); err != nil {
		return bidgate.Auction{}, err
	}
	a, err := s.store.CreateAuction(ctx, n)
	if err != nil {
		return a, classify(err)
	}
	if a.Mode == bidgate.ModeHot {
		s.hotIDs.Store(a.ID, struct{}{})
		if _, err := s.rs.Load(ctx, a, nil, false); err != nil {
			s.log.Warn("hot auction created but not yet in Redis", "auction", a.ID, "err", err)
		}
	}
	return a, nil
}

// Auction returns an auction's current state: a hot one's live from Redis,
// a cold one's row from the read replica when one serves (as of at most its
// lag bound ago), else from the primary.
func (s *Service) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	if s.reads == nil {
		return s.primaryAuction(ctx, id)
	}
	a, err := s.reads.Auction(ctx, id)
	if err != nil {
		return a, classify(err)
	}
	if _, isHot := s.hotIDs.Load(id); isHot && a.Mode == bidgate.ModeCold {
		// The replica has not replayed a promotion this node made or saw:
		// its cold row's price may be far behind Redis's.
		return s.primaryAuction(ctx, id)
	}
	return s.withLiveState(ctx, a)
}

// Current reads auctions as Service.Auction does, except that a cold
// auction's row always comes from the primary: for a reader that must not
// see state older than what it already holds, such as the fan-out's
// snapshot, read after subscribing to the updates so as to miss none.
type Current struct{ s *Service }

// Current returns s's reader of current state.
func (s *Service) Current() Current { return Current{s: s} }

// Auction returns the auction's current state.
func (c Current) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	return c.s.primaryAuction(ctx, id)
}

// Read is Auction for a caller that needs at least minSeq, its own bid's
// (GET /auctions/{id}?minSeq=): a read replica's row that has not reached
// it is read again from the primary.
func (s *Service) Read(ctx context.Context, id, minSeq int64) (bidgate.Auction, error) {
	a, err := s.Auction(ctx, id)
	if err != nil || a.BidCount >= minSeq || s.reads == nil {
		return a, err
	}
	return s.primaryAuction(ctx, id)
}

// primaryAuction is Auction read from the primary: what a caller that just
// wrote the auction must see.
func (s *Service) primaryAuction(ctx context.Context, id int64) (bidgate.Auction, error) {
	a, err := s.store.Auction(ctx, id)
	if err != nil {
		return a, classify(err)
	}
	return s.withLiveState(ctx, a)
}

// withLiveState overlays a hot auction's live Redis state on its row.
func (s *Service) withLiveState(ctx context.Context, a bidgate.Auction) (bidgate.Auction, error) {
	if a.Mode == bidgate.ModeHot {
		s.hotIDs.Store(a.ID, struct{}{})
		return s.hot.auction(ctx, a)
	}
	return a, nil
}

// PlaceBid decides one bid, or a buy-now (r.BuyNow). It returns a BidResult
// (new or replayed) or one of bidgate's errors: ErrAuctionNotFound,
// ErrAuctionClosed, a *BidTooLowError, ErrIdempotencyKeyReused,
// ErrSelfBidding, ErrAlreadyLeading, ErrMaxNotRaised, ErrBuyNowUnavailable,
// a *RateLimitedError, ErrOverloaded, an *InputError, ErrUnavailable (a
// *bidgate.TimeoutError when the stores did not answer within
// StoreTimeout); anything else is a bug.
func (s *Service) PlaceBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	if err := r.Validate(); err != nil {
		return bidgate.BidResult{}, err
	}
	place := s.placeBid
	if r.BuyNow {
		place = s.buyNow
	}
	ctx, cancel := context.WithTimeout(ctx, s.storeTimeout)
	defer cancel()
	res, err := place(ctx, r)
	if _, tooLow := err.(*bidgate.BidTooLowError); err == nil || tooLow {
		// Most bids on a hot auction end here; the unwrapping below
		// is for store failures.
		return res, err
	}
	err = timedOut(err, false)
	switch {
	case errors.Is(err, bidgate.ErrRateLimited):
		s.metrics.rateLimited.Inc()
	case errors.Is(err, bidgate.ErrOverloaded):
		s.metrics.overloaded.Inc()
	}
	return res, classify(err)
}

func (s *Service) placeBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	if _, isHot := s.hotIDs.Load(r.AuctionID); isHot {
		// The batch script answers a hopeless bid along with the rest of
		// its batch (replays first, as always), so the price cache only
		// spares it a token there: no round trip of its own.
		return s.hot.placeBid(ctx, r, false)
	}
	if refusal := s.cache.refuses(r); refusal != nil {
		// A replay of an accepted bid is always below the current price, and
		// replays are answered before anything else: only a key the store
		// does not know may be refused from the cache.
		known, err := s.knowsRequest(ctx, r)
		if err != nil {
			return bidgate.BidResult{}, timedOut(err, true)
		}
		if !known {
			s.metrics.earlyRejects.Inc()
			return bidgate.BidResult{}, refusal
		}
	}
	if err := s.limiter.allow(ctx, r.BidderID); err != nil {
		return bidgate.BidResult{}, timedOut(err, true) // the bid itself was not sent
	}
	res, err := s.cold.placeBid(ctx, r)
	if errors.Is(err, errNotCold) {
		s.hotIDs.Store(r.AuctionID, struct{}{})
		return s.hot.placeBid(ctx, r, true)
	}
	if s.heat.hit(r.AuctionID) {
		s.promoteSoon(r.AuctionID)
	}
	return res, err
}

// knowsRequest reports whether a cold auction holds a bid under the key
// (or turned hot: then the hot path decides).
func (s *Service) knowsRequest(ctx context.Context, r bidgate.BidRequest) (bool, error) {
	v, err := s.cold.lookUp(ctx, r)
	if err != nil {
		return false, err
	}
	return v.Existing != nil || v.Mode != bidgate.ModeCold, nil
}

// timedOut marks err, when a store call ran out of time, as a
// *bidgate.TimeoutError: undecided when the caller knows the bid was not
// sent to the store that decides it, else one that may still be decided.
// An err that says already is left alone.
func timedOut(err error, undecided bool) error {
	var t *bidgate.TimeoutError
	if err == nil || errors.As(err, &t) || !isTimeout(err) {
		return err
	}
	return &bidgate.TimeoutError{Undecided: undecided, Err: err}
}

// isTimeout reports whether err is a deadline that passed: the context's,
// a PostgreSQL connection's or a Redis connection's.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || (errors.As(err, &netErr) && netErr.Timeout())
}

// classify marks store outages as bidgate.ErrUnavailable so that callers can
// tell "try again later" from a refusal.
func classify(err error) error {
	if err != nil && !errors.Is(err, bidgate.ErrUnavailable) && pgstore.IsUnavailable(err) {
		return fmt.Errorf("%w: %w", bidgate.ErrUnavailable, err)
	}
	return err
}
