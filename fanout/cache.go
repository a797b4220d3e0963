package fanout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"golang.org/x/sync/singleflight"

	"bidgate"
	"bidgate/persist/redisstore"
)

// CacheConfig tunes a Cache.
type CacheConfig struct {
	// Size bounds the auctions a node caches, and so subscribes to; 0
	// turns the cache off (withDefaults leaves it alone).
	Size int
	// MaxAge bounds how long ago the store read behind an open auction's
	// answer started. Updates keep an entry current in between; the bound
	// covers the ones pub/sub lost (a publish is best effort).
	MaxAge time.Duration
	Log    *slog.Logger
}

// MaxCacheSize bounds CacheConfig.Size: each entry is a Redis
// subscription of the node.
const MaxCacheSize = 1_000_000

// DefaultCacheConfig is the one statement of the read cache's defaults.
func DefaultCacheConfig() CacheConfig {
	return CacheConfig{Size: 10000, MaxAge: time.Second, Log: slog.Default()}
}

// withDefaults fills MaxAge and Log; a zero Size means off, not "default".
func (c CacheConfig) withDefaults() CacheConfig {
	d := DefaultCacheConfig()
	c.MaxAge = cmp.Or(c.MaxAge, d.MaxAge)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Validate reports the settings a Cache cannot run with, zero fields
// included.
func (c CacheConfig) Validate() error {
	var errs []error
	if c.Size < 0 || c.Size > MaxCacheSize {
		errs = append(errs, fmt.Errorf("%s must be from 0 (off) to %d, got %d", "Size", MaxCacheSize, c.Size))
	}
	if c.MaxAge <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive, got %v", "MaxAge", c.MaxAge))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("read cache: %w", err)
	}
	return nil
}

// subscribeWait bounds how long a first read waits for Redis to confirm the
// auction's subscription; past it the read is answered uncached.
const subscribeWait = time.Second

// Cache answers auction reads from memory, kept fresh by the auctions'
// state updates. A miss reads the source once per auction at a time
// (single flight) after Redis confirmed the auction's subscription, so no
// update published after the read is missed. An update applies when its seq
// is higher or it makes the auction final; a subscription confirmed again
// (updates may have been missed) or a malformed update drops the state. An
// open auction's state is read again once MaxAge old; a final one is kept
// until evicted (it never changes). An evicted auction is unsubscribed.
//
// The update carries what bids, closes and cancels change (price, leader,
// end, status, seq) and a promotion's mode; everything else of an auction
// never changes, so entries are patched rather than read again.
type Cache struct {
	src     Snapshotter
	cfg     CacheConfig
	sub     *redisstore.Subscriber
	metrics *cacheMetrics
	loads   singleflight.Group
	now     func() time.Time // the node's clock: ages only, no auction decision

	// subMu orders adding entries (and their SSUBSCRIBE) with evictions'
	// SUNSUBSCRIBE; it is held for the commands' writes, never by Run.
	subMu   sync.Mutex
	mu      sync.Mutex // guards the fields below and every entry
	entries *simplelru.LRU[int64, *cacheEntry]
	evicted []int64 // to unsubscribe, under subMu
	stopped bool
}

// cacheEntry is one auction's subscription and, once read, its state.
type cacheEntry struct {
	ready     chan struct{} // closed when Redis first confirmed the subscription
	confirmed bool
	has       bool // a is a state to answer with
	a         bidgate.Auction
	readAt    time.Time // when the read behind a started
	// latest is the newest update seen, applied to a read that was under
	// way when it came.
	latest    redisstore.Update
	hasLatest bool
	hot       bool // a promotion was announced
	// drops counts the times the state was dropped, so that a read under
	// way meanwhile is not kept.
	drops uint64
}

// NewCache returns a Cache of auctions read from src, subscribed on rdb,
// with its metrics on reg; nil when cfg.Size is 0 (off). Run must run.
func NewCache(rdb redis.UniversalClient, src Snapshotter, cfg CacheConfig, reg prometheus.Registerer) *Cache {
	cfg = cfg.withDefaults()
	if cfg.Size == 0 {
		return nil
	}
	c := &Cache{src: src, cfg: cfg, sub: redisstore.NewSubscriber(rdb, pubsubBuffer), metrics: newCacheMetrics(reg), now: time.Now}
	// Only a full LRU's Add or an explicit Remove calls this, under mu.
	c.entries, _ = simplelru.NewLRU(cfg.Size, func(id int64, _ *cacheEntry) { c.evicted = append(c.evicted, id) })
	return c
}

// Run applies the subscribed auctions' updates until ctx ends, then closes
// the subscription.
func (c *Cache) Run(ctx context.Context) error {
	events := c.sub.Events()
	defer c.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			c.dispatch(ev)
		}
	}
}

func (c *Cache) stop() {
	c.mu.Lock()
	c.stopped = true
	c.entries.Purge()
	c.evicted = nil
	c.metrics.entries.Set(0)
	c.mu.Unlock()
	_ = c.sub.Close()
}

// Auction is Read with no seq asked for.
func (c *Cache) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	return c.Read(ctx, id, 0)
}

// Read returns auction id's state, at least minSeq new when the auction has
// reached it: a read-your-writes bypass of a staler entry. The hidden
// maximum (LeaderMax) is never in it.
func (c *Cache) Read(ctx context.Context, id, minSeq int64) (bidgate.Auction, error) {
	c.mu.Lock()
	e, ok := c.entries.Get(id)
	if ok && e.has && e.a.BidCount >= minSeq && (e.a.Status.Final() || c.now().Sub(e.readAt) < c.cfg.MaxAge) {
		a := e.a
		c.mu.Unlock()
		c.metrics.hits.Inc()
		return a, nil
	}
	stale := ok && e.has
	c.mu.Unlock()
	if stale {
		c.metrics.staleRereads.Inc()
	} else {
		c.metrics.misses.Inc()
	}
	own := false
	v, err, _ := c.loads.Do(strconv.FormatInt(id, 10), func() (any, error) {
		own = true
		return c.fill(ctx, id)
	})
	if !own {
		c.metrics.sharedLoads.Inc()
	}
	if err != nil {
		return bidgate.Auction{}, err
	}
	a := v.(bidgate.Auction)
	if _, pastLag := c.src.(seqReader); a.BidCount < minSeq && (!own || pastLag) {
		// The read joined may have started before the caller's bid was
		// answered, or read a replica behind it; a read of its own, past
		// the replica, is the store's latest.
		return c.read(ctx, id, minSeq)
	}
	return a, nil
}

// seqReader is a source that can read past its own lag: shard.Service
// reads the primary when its read replica has not reached minSeq.
type seqReader interface {
	Read(ctx context.Context, id, minSeq int64) (bidgate.Auction, error)
}

// read is an uncached read of the source, at least minSeq new when the
// source can tell.
func (c *Cache) read(ctx context.Context, id, minSeq int64) (bidgate.Auction, error) {
	var (
		a   bidgate.Auction
		err error
	)
	if r, ok := c.src.(seqReader); ok && minSeq > 0 {
		a, err = r.Read(ctx, id, minSeq)
	} else {
		a, err = c.src.Auction(ctx, id)
	}
	a.LeaderMax = decimal.Zero
	return a, err
}

// fill reads auction id, once its subscription is confirmed, into its
// entry. Unconfirmed, the read is answered but not kept.
func (c *Cache) fill(ctx context.Context, id int64) (bidgate.Auction, error) {
	e, added, err := c.track(ctx, id)
	if err != nil {
		if !errors.Is(err, redisstore.ErrSubscriberClosed) {
			c.cfg.Log.Warn("read cache: subscribe", "auction", id, "err", err)
		}
		return c.read(ctx, id, 0)
	}
	if added {
		// Later reads do not wait: while Redis does not confirm, each is
		// answered uncached.
		wait, cancel := context.WithTimeout(ctx, subscribeWait)
		select {
		case <-e.ready:
		case <-wait.Done():
		}
		cancel()
	}
	c.mu.Lock()
	confirmed, drops := e.confirmed, e.drops
	c.mu.Unlock()
	start := c.now()
	a, err := c.read(ctx, id, 0)
	if errors.Is(err, bidgate.ErrAuctionNotFound) {
		c.forget(ctx, id, e)
	}
	if err != nil || !confirmed {
		return a, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.hot {
		a.Mode = bidgate.ModeHot
	}
	if e.hasLatest && newer(e.latest, a) {
		a = applyUpdate(a, e.latest)
	}
	if cur, ok := c.entries.Peek(id); ok && cur == e && e.drops == drops && (!e.has || !newer(redisstore.UpdateOf(e.a, time.Time{}), a)) {
		e.a, e.has, e.readAt = a, true, start
	}
	return a, nil
}

// track returns auction id's entry, adding it and subscribing when it is
// new (which may evict the least recently read one).
func (c *Cache) track(ctx context.Context, id int64) (e *cacheEntry, added bool, err error) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, false, redisstore.ErrSubscriberClosed
	}
	e, ok := c.entries.Peek(id)
	if !ok {
		e = &cacheEntry{ready: make(chan struct{})}
		if c.entries.Add(id, e) {
			c.metrics.evictions.Inc()
		}
		c.metrics.entries.Set(float64(c.entries.Len()))
	}
	gone := c.evicted
	c.evicted = nil
	c.mu.Unlock()
	c.unsubscribe(ctx, gone)
	if ok {
		return e, false, nil
	}
	if err := c.sub.Subscribe(ctx, id); err != nil {
		c.mu.Lock()
		c.entries.Remove(id)
		c.evicted = nil // never subscribed
		c.metrics.entries.Set(float64(c.entries.Len()))
		c.mu.Unlock()
		return nil, false, err
	}
	return e, true, nil
}

// forget drops the entry of an auction that does not exist.
func (c *Cache) forget(ctx context.Context, id int64, e *cacheEntry) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.mu.Lock()
	if cur, ok := c.entries.Peek(id); ok && cur == e {
		c.entries.Remove(id)
	}
	gone := c.evicted
	c.evicted = nil
	c.metrics.entries.Set(float64(c.entries.Len()))
	c.mu.Unlock()
	c.unsubscribe(ctx, gone)
}

// unsubscribe ends the subscriptions of evicted entries; subMu is held.
func (c *Cache) unsubscribe(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), joinTimeout)
	defer cancel()
	for _, id := range ids {
		c.sub.Unsubscribe(ctx, id)
	}
}

// dispatch never blocks on I/O: Run serves every auction of the node.
func (c *Cache) dispatch(ev redisstore.Event) {
	if ev.AuctionID == 0 {
		c.metrics.drops.WithLabelValues("connection_lost").Inc()
		return // its auctions' confirmations follow and drop them
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries.Peek(ev.AuctionID)
	if !ok {
		return // unsubscribed meanwhile
	}
	switch {
	case ev.Subscribed && !e.confirmed:
		e.confirmed = true
		close(e.ready)
	case ev.Subscribed:
		c.drop(e, "resubscribed") // updates may have been missed
	case ev.Err != nil:
		c.drop(e, "malformed_update")
	default:
		c.apply(e, ev.Update)
	}
}

// drop forgets e's state, keeping its subscription; mu is held.
func (c *Cache) drop(e *cacheEntry, reason string) {
	e.has, e.hasLatest = false, false
	e.drops++
	c.metrics.drops.WithLabelValues(reason).Inc()
}

// apply takes an update into e; mu is held.
func (c *Cache) apply(e *cacheEntry, u redisstore.Update) {
	if u.Mode == bidgate.ModeHot {
		e.hot = true // a mode only goes COLD -> HOT
		if e.has {
			e.a.Mode = bidgate.ModeHot
		}
	}
	if !e.hasLatest || newer(u, bidgate.Auction{BidCount: e.latest.Seq, Status: e.latest.Status}) {
		e.latest, e.hasLatest = u, true
	}
	if e.has && newer(u, e.a) {
		e.a = applyUpdate(e.a, u)
		c.metrics.updates.Inc()
	}
}

// newer reports whether u replaces state a: a final state never changes,
// and cold bids' updates may arrive out of order.
func newer(u redisstore.Update, a bidgate.Auction) bool {
	return !a.Status.Final() && (u.Seq > a.BidCount || u.Status.Final())
}

// applyUpdate patches a with u. An update without the leader's alias (the
// closer's, which never changes the leader) keeps the alias of the same
// leader, and forgets that of another.
func applyUpdate(a bidgate.Auction, u redisstore.Update) bidgate.Auction {
	switch {
	case u.LeaderAlias != 0:
		a.LeaderAlias = u.LeaderAlias
	case u.LeaderID != a.LeaderID:
		a.LeaderAlias = 0
	}
	a.CurrentPrice, a.LeaderID, a.Status, a.BidCount = bidgate.FromCents(u.PriceCents), u.LeaderID, u.Status, u.Seq
	a.EndTime = time.UnixMicro(u.EndUs).UTC()
	return a
}
