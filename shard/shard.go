// Package shard is the serialization point of each auction. A cold auction's
// bids are decided by one PostgreSQL statement each; a hot auction's by one
// Redis script call per batch of waiting bids. In front of both sit a price
// cache that refuses hopeless bids early and a per-bidder token bucket.
package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/persist"
)

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	MaxBatch    int           // bids per hot script call; default 256 (1 disables batching)
	MaxQueue    int           // waiting bids per hot auction before 503; default 4096
	BatchIdle   time.Duration // an idle hot auction's goroutine exits after this; default 2s
	CacheMaxAge time.Duration // price cache entries older than this are ignored; default 300ms
	RateLimit   float64       // bids per second per bidder; default 5, negative disables
	RateBurst   int           // token bucket size; default 10
	PromoteRate int           // cold bids per second on one node that promote an auction; default 20, negative disables
	Log         *slog.Logger  // default slog.Default()
	// OnHotAccepted, when set, is called after a batch accepted bids on a hot
	// auction (the relay of this process wakes on it).
	OnHotAccepted func(auctionID int64)
}

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxBatch, 256)
	def(&c.MaxQueue, 4096)
	def(&c.RateBurst, 10)
	def(&c.PromoteRate, 20)
	if c.BatchIdle <= 0 {
		c.BatchIdle = 2 * time.Second
	}
	if c.CacheMaxAge <= 0 {
		c.CacheMaxAge = 300 * time.Millisecond
	}
	if c.RateLimit == 0 {
		c.RateLimit = 5
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Service places bids and serves auctions.
type Service struct {
	db      *pgxpool.Pool
	rdb     redis.UniversalClient
	store   persist.Store
	cold    *cold
	hot     *hot
	cache   *priceCache
	limiter *limiter
	heat    *heatMeter
	metrics *metrics
	log     *slog.Logger

	hotIDs    sync.Map // auction id -> struct{}: known hot (mode only goes COLD -> HOT)
	promoting sync.Map // auction id -> struct{}: automatic promotion under way
}

// New returns a Service on PostgreSQL db and Redis rdb, with metrics on reg.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) *Service {
	cfg.setDefaults()
	m := newMetrics(reg)
	cache := newPriceCache(cfg.CacheMaxAge)
	pub := &publisher{rdb: rdb, metrics: m}
	s := &Service{
		db: db, rdb: rdb, store: persist.Store{DB: db}, cache: cache, metrics: m,
		cold:    &cold{db: db, cache: cache, pub: pub},
		limiter: newLimiter(rdb, cfg.RateLimit, cfg.RateBurst),
		heat:    newHeatMeter(cfg.PromoteRate),
		log:     cfg.Log,
	}
	s.hot = &hot{rdb: rdb, db: db, cache: cache, metrics: m, pub: pub, onAccepted: cfg.OnHotAccepted}
	s.hot.batches = newBatchers(cfg.MaxBatch, cfg.MaxQueue, cfg.BatchIdle, s.hot.runBatch)
	s.hot.batches.observe = func(n int) { m.batchSize.Observe(float64(n)) }
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
		if _, err := writeState(ctx, s.rdb, a, nil, false); err != nil {
			s.log.Warn("hot auction created but not yet in Redis", "auction", a.ID, "err", err)
		}
	}
	return a, nil
}

// Auction returns an auction's current state: a hot one's live from Redis.
func (s *Service) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	a, err := s.store.Auction(ctx, id)
	if err != nil {
		return a, classify(err)
	}
	if a.Mode == bidgate.ModeHot {
		s.hotIDs.Store(a.ID, struct{}{})
		return s.hot.auction(ctx, a)
	}
	return a, nil
}

// PlaceBid decides one bid. It returns a BidResult (new or replayed) or one of
// bidgate's errors: ErrAuctionNotFound, ErrAuctionClosed, a *BidTooLowError,
// ErrIdempotencyKeyReused, a *RateLimitedError, ErrOverloaded, an
// *InputError, ErrUnavailable; anything else is a bug.
func (s *Service) PlaceBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	if err := r.Validate(); err != nil {
		return bidgate.BidResult{}, err
	}
	res, err := s.placeBid(ctx, r)
	switch {
	case errors.Is(err, bidgate.ErrRateLimited):
		s.metrics.rateLimited.Inc()
	case errors.Is(err, bidgate.ErrOverloaded):
		s.metrics.overloaded.Inc()
	}
	return res, classify(err)
}

func (s *Service) placeBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	_, isHot := s.hotIDs.Load(r.AuctionID)
	if refusal := s.cache.refuses(r); refusal != nil {
		// A replay of an accepted bid is always below the current price, and
		// replays are answered before anything else: only a key the store
		// does not know may be refused from the cache.
		known, err := s.knowsRequest(ctx, r, isHot)
		if err != nil {
			return bidgate.BidResult{}, err
		}
		if !known {
			s.metrics.earlyRejects.Inc()
			return bidgate.BidResult{}, refusal
		}
	}
	if err := s.limiter.allow(ctx, r.BidderID); err != nil {
		return bidgate.BidResult{}, err
	}
	if isHot {
		return s.hot.placeBid(ctx, r)
	}
	res, err := s.cold.placeBid(ctx, r)
	if errors.Is(err, errNotCold) {
		s.hotIDs.Store(r.AuctionID, struct{}{})
		return s.hot.placeBid(ctx, r)
	}
	if s.heat.hit(r.AuctionID) {
		s.promoteSoon(r.AuctionID)
	}
	return res, err
}

func (s *Service) knowsRequest(ctx context.Context, r bidgate.BidRequest, isHot bool) (bool, error) {
	if isHot {
		return s.hot.knowsRequest(ctx, r)
	}
	v, err := s.cold.lookUp(ctx, r)
	if err != nil {
		return false, err
	}
	return v.existing != nil || v.mode != bidgate.ModeCold, nil
}

// classify marks store outages as bidgate.ErrUnavailable so that callers can
// tell "try again later" from a refusal.
func classify(err error) error {
	if err != nil && !errors.Is(err, bidgate.ErrUnavailable) && persist.IsUnavailable(err) {
		return fmt.Errorf("%w: %w", bidgate.ErrUnavailable, err)
	}
	return err
}
