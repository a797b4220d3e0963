package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/closer"
	"bidgate/internal/await"
	"bidgate/persist/redisstore"
)

// countingSource is the shard with its reads counted and, while gate is
// set, held until it is closed.
type countingSource struct {
	Snapshotter
	reads atomic.Int64
	gate  chan struct{}
}

func (s *countingSource) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	s.reads.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	return s.Snapshotter.Auction(ctx, id)
}

// fakeClock is the cache's clock in tests that move time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// cacheEnv is a running Cache over a counted shard.
type cacheEnv struct {
	*env
	src   *countingSource
	cache *Cache
	clock *fakeClock
}

func startCache(t *testing.T, cfg CacheConfig) *cacheEnv {
	t.Helper()
	e := newEnv(t)
	return startCacheOn(t, e, e.rdb, cfg)
}

// startCacheOn runs a cache over e's shard that subscribes on rdb.
func startCacheOn(t *testing.T, e *env, rdb redis.UniversalClient, cfg CacheConfig) *cacheEnv {
	t.Helper()
	src := &countingSource{Snapshotter: e.svc}
	c := NewCache(rdb, src, cfg, prometheus.NewRegistry())
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	c.now = clock.now
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache run: %v", err)
		}
	})
	return &cacheEnv{env: e, src: src, cache: c, clock: clock}
}

// read reads through the cache and fails the test on an error.
func (ce *cacheEnv) read(t *testing.T, id, minSeq int64) bidgate.Auction {
	t.Helper()
	a, err := ce.cache.Read(bg, id, minSeq)
	if err != nil {
		t.Fatalf("read auction %d: %v", id, err)
	}
	return a
}

func TestCacheSingleFlight(t *testing.T) {
	ce := startCache(t, CacheConfig{Size: 100, MaxAge: time.Hour})
	a := createAuction(t, ce.svc, false)
	ce.src.gate = make(chan struct{})
	const callers = 32
	var wg sync.WaitGroup
	got := make([]bidgate.Auction, callers)
	for i := range callers {
		wg.Go(func() {
			var err error
			if got[i], err = ce.cache.Read(bg, a.ID, 0); err != nil {
				t.Errorf("read: %v", err)
			}
		})
	}
	// Every caller has missed (and so joined the one load) before the
	// store answers.
	await.Until(t, 10*time.Second, "every caller missed", nil, func() (float64, bool) {
		n := testutil.ToFloat64(ce.cache.metrics.misses)
		return n, n == callers
	})
	close(ce.src.gate)
	wg.Wait()
	if n := ce.src.reads.Load(); n != 1 {
		t.Fatalf("%d concurrent reads of a cold miss made %d store reads, want 1", callers, n)
	}
	if n := testutil.ToFloat64(ce.cache.metrics.sharedLoads); n != callers-1 {
		t.Fatalf("shared loads %v, want %d", n, callers-1)
	}
	for _, g := range got {
		if g.ID != a.ID || g.Status != bidgate.StatusOpen {
			t.Fatalf("read %+v", g)
		}
	}
	ce.read(t, a.ID, 0)
	if n := ce.src.reads.Load(); n != 1 {
		t.Fatalf("a read after the fill made %d store reads, want still 1", n)
	}
}

// TestCacheSeesEveryChange: each way an auction changes reaches the next
// read through its published update, with no store read (the cache's
// max-age is an hour).
func TestCacheSeesEveryChange(t *testing.T) {
	tests := []struct {
		name   string
		hot    bool
		change func(t *testing.T, ce *cacheEnv, id int64)
		want   func(a bidgate.Auction) bool
	}{
		{"cold bid", false, func(t *testing.T, ce *cacheEnv, id int64) { mustBid(t, ce.svc, id, 42, 150) },
			func(a bidgate.Auction) bool {
				return a.BidCount == 1 && a.LeaderID == 42 && a.CurrentPrice.Equal(decimal.NewFromInt(150))
			}},
		{"hot bid", true, func(t *testing.T, ce *cacheEnv, id int64) { mustBid(t, ce.svc, id, 42, 150) },
			func(a bidgate.Auction) bool { return a.BidCount == 1 && a.LeaderID == 42 && a.Mode == bidgate.ModeHot }},
		{"close", false, func(t *testing.T, ce *cacheEnv, id int64) {
			mustBid(t, ce.svc, id, 42, 150)
			if _, err := ce.db.Exec(bg, `UPDATE auction SET end_time = clock_timestamp() WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			c := closer.New(ce.db, ce.rdb, closer.Config{}, prometheus.NewRegistry())
			if n, err := c.CloseDue(bg); err != nil || n != 1 {
				t.Fatalf("close due: %d, %v", n, err)
			}
		}, func(a bidgate.Auction) bool {
			return a.Status == bidgate.StatusClosed && a.BidCount == 1 && a.LeaderID == 42
		}},
		{"cancel", false, func(t *testing.T, ce *cacheEnv, id int64) {
			if _, err := ce.svc.Cancel(bg, id, 9_000_007); err != nil {
				t.Fatal(err)
			}
		}, func(a bidgate.Auction) bool { return a.Status == bidgate.StatusCancelled }},
		{"cold buy-now", false, buyNow, func(a bidgate.Auction) bool {
			return a.Status == bidgate.StatusClosed && a.LeaderID == 43 && a.CurrentPrice.Equal(decimal.NewFromInt(500))
		}},
		{"hot buy-now", true, buyNow, func(a bidgate.Auction) bool {
			return a.Status == bidgate.StatusClosed && a.LeaderID == 43 && a.CurrentPrice.Equal(decimal.NewFromInt(500))
		}},
		{"promotion", false, func(t *testing.T, ce *cacheEnv, id int64) {
			if _, err := ce.svc.Promote(bg, id, "operator"); err != nil {
				t.Fatal(err)
			}
		}, func(a bidgate.Auction) bool { return a.Mode == bidgate.ModeHot && a.BidCount == 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ce := startCache(t, CacheConfig{Size: 100, MaxAge: time.Hour})
			a := createAuctionWith(t, ce.svc, tc.hot, decimal.NewNullDecimal(decimal.NewFromInt(500)))
			if before := ce.read(t, a.ID, 0); tc.want(before) {
				t.Fatalf("the auction shows the change before it: %+v", before)
			}
			reads := ce.src.reads.Load()
			tc.change(t, ce, a.ID)
			got := await.Until(t, 10*time.Second, "the change in the cached auction", nil, func() (bidgate.Auction, bool) {
				a := ce.read(t, a.ID, 0)
				return a, tc.want(a)
			})
			if n := ce.src.reads.Load(); n != reads {
				t.Fatalf("the cache read the store %d times; the update alone should carry the change", n-reads)
			}
			if !got.LeaderMax.IsZero() {
				t.Fatalf("a cached auction carries the leader's hidden maximum %s", got.LeaderMax)
			}
		})
	}
}

func buyNow(t *testing.T, ce *cacheEnv, id int64) {
	t.Helper()
	if _, err := ce.svc.PlaceBid(bg, bidgate.BidRequest{AuctionID: id, BidderID: 43, BuyNow: true, RequestID: uuid.New()}); err != nil {
		t.Fatalf("buy now: %v", err)
	}
}

func createAuctionWith(tb testing.TB, svc interface {
	CreateAuction(context.Context, bidgate.NewAuction) (bidgate.Auction, error)
}, hot bool, buyNow decimal.NullDecimal) bidgate.Auction {
	tb.Helper()
	a, err := svc.CreateAuction(bg, bidgate.NewAuction{SellerID: 9_000_007, Title: "lot", StartPrice: decimal.NewFromInt(100),
		MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), Hot: hot, BuyNowPrice: buyNow,
		ExtendWindow: bidgate.DefaultExtendWindow, ExtendBy: bidgate.DefaultExtendBy})
	if err != nil {
		tb.Fatalf("create auction: %v", err)
	}
	return a
}

// TestCacheMaxAge: an open auction's state is read again once its read is
// max-age old; a closed one is kept.
func TestCacheMaxAge(t *testing.T) {
	ce := startCache(t, CacheConfig{Size: 100, MaxAge: time.Second})
	open := createAuction(t, ce.svc, false)
	cancelled := createAuction(t, ce.svc, false)
	if _, err := ce.svc.Cancel(bg, cancelled.ID, 9_000_007); err != nil {
		t.Fatal(err)
	}
	ce.read(t, open.ID, 0)
	ce.read(t, cancelled.ID, 0)
	if _, err := ce.db.Exec(bg, `UPDATE auction SET current_price = 120, leader_id = 44, bid_count = 1 WHERE id = $1`, open.ID); err != nil {
		t.Fatal(err)
	}
	reads := ce.src.reads.Load()
	ce.clock.add(999 * time.Millisecond)
	if got := ce.read(t, open.ID, 0); got.BidCount != 0 || ce.src.reads.Load() != reads {
		t.Fatalf("within max-age: %+v after %d store reads, want the cached state", got, ce.src.reads.Load()-reads)
	}
	ce.clock.add(time.Millisecond)
	if got := ce.read(t, open.ID, 0); got.BidCount != 1 || got.LeaderID != 44 {
		t.Fatalf("at max-age: %+v, want the store's state", got)
	}
	ce.clock.add(time.Hour)
	reads = ce.src.reads.Load()
	if got := ce.read(t, cancelled.ID, 0); got.Status != bidgate.StatusCancelled || ce.src.reads.Load() != reads {
		t.Fatalf("a cancelled auction an hour on: %+v after %d store reads, want the cached state", got, ce.src.reads.Load()-reads)
	}
	if n := testutil.ToFloat64(ce.cache.metrics.staleRereads); n != 1 {
		t.Fatalf("stale re-reads %v, want 1", n)
	}
}

// TestCacheMinSeq: a read naming a seq the cached state lacks reads the
// store (read-your-writes), and keeps what it read.
func TestCacheMinSeq(t *testing.T) {
	ce := startCache(t, CacheConfig{Size: 100, MaxAge: time.Hour})
	a := createAuction(t, ce.svc, false)
	ce.read(t, a.ID, 0)
	// As if the bid's update were still on its way.
	if _, err := ce.db.Exec(bg, `UPDATE auction SET current_price = 120, leader_id = 44, bid_count = 1 WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		minSeq  int64
		want    int64
		storeRd int64
	}{
		{"no seq asked: the cached state", 0, 0, 0},
		{"the bid's seq: read again", 1, 1, 1},
		{"then cached", 1, 1, 0},
		{"a seq the auction has not reached: as it is", 5, 1, 1},
	}
	for _, tc := range tests {
		reads := ce.src.reads.Load()
		got := ce.read(t, a.ID, tc.minSeq)
		if got.BidCount != tc.want || ce.src.reads.Load()-reads != tc.storeRd {
			t.Fatalf("%s: seq %d after %d store reads, want %d after %d", tc.name, got.BidCount, ce.src.reads.Load()-reads, tc.want, tc.storeRd)
		}
	}
}

// TestCacheLRUBound: the cache keeps Size auctions; the least recently
// read one is evicted and unsubscribed.
func TestCacheLRUBound(t *testing.T) {
	ce := startCache(t, CacheConfig{Size: 2, MaxAge: time.Hour})
	ids := make([]int64, 3)
	for i := range ids {
		ids[i] = createAuction(t, ce.svc, false).ID
		ce.read(t, ids[i], 0)
	}
	if n := testutil.ToFloat64(ce.cache.metrics.entries); n != 2 {
		t.Fatalf("entries %v, want 2", n)
	}
	if n := testutil.ToFloat64(ce.cache.metrics.evictions); n != 1 {
		t.Fatalf("evictions %v, want 1", n)
	}
	subscribers := func(id int64) int64 {
		// A shard channel's subscribers are counted by the primary of its
		// slot; on a Redis Cluster, ask that one.
		ch := redisstore.Channel(id)
		var node interface {
			Do(ctx context.Context, args ...any) *redis.Cmd
		} = ce.rdb
		if cc, ok := ce.rdb.(*redis.ClusterClient); ok {
			primary, err := cc.MasterForKey(bg, ch)
			if err != nil {
				t.Fatalf("the primary of %s: %v", ch, err)
			}
			node = primary
		}
		v, err := node.Do(bg, "PUBSUB", "SHARDNUMSUB", ch).Slice()
		if err != nil || len(v) != 2 {
			t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", v, err)
		}
		return v[1].(int64)
	}
	await.Until(t, 10*time.Second, "the evicted auction unsubscribed", nil, func() ([3]int64, bool) {
		n := [3]int64{subscribers(ids[0]), subscribers(ids[1]), subscribers(ids[2])}
		return n, n == [3]int64{0, 1, 1}
	})
	reads := ce.src.reads.Load()
	ce.read(t, ids[0], 0)
	if ce.src.reads.Load() != reads+1 {
		t.Fatal("the evicted auction was answered from memory")
	}
}

func TestCacheUnknownAuction(t *testing.T) {
	ce := startCache(t, CacheConfig{Size: 10, MaxAge: time.Hour})
	_, err := ce.cache.Read(bg, 987_654_321, 0)
	if !errors.Is(err, bidgate.ErrAuctionNotFound) {
		t.Fatalf("read of an unknown auction: %v", err)
	}
	if n := testutil.ToFloat64(ce.cache.metrics.entries); n != 0 {
		t.Fatalf("an unknown auction holds an entry (entries %v)", n)
	}
}

func TestCacheConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  CacheConfig
		ok   bool
	}{
		{"defaults", DefaultCacheConfig(), true},
		{"off", CacheConfig{Size: 0, MaxAge: time.Second}, true},
		{"negative size", CacheConfig{Size: -1, MaxAge: time.Second}, false},
		{"too large", CacheConfig{Size: MaxCacheSize + 1, MaxAge: time.Second}, false},
		{"no max age", CacheConfig{Size: 10}, false},
	}
	for _, tc := range tests {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	if NewCache(nil, nil, CacheConfig{}, nil) != nil {
		t.Error("a cache of size 0 is not off")
	}
}
