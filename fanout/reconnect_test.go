//go:build !rediscluster

// Tests of one Redis server's own behaviour: make test runs them; make
// test-cluster (-tags rediscluster) runs the cluster's instead.

package fanout

import (
	"bidgate"
	"bidgate/internal/await"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
)

// TestCacheDropsOnResubscription: a lost pub/sub connection may have lost
// updates, so the auctions it carried are read again once subscribed anew.
func TestCacheDropsOnResubscription(t *testing.T) {
	e := newEnv(t)
	// The cache's own client, named so that the test kills only its
	// pub/sub connection (the Redis server is shared).
	single, ok := e.rdb.(*redis.Client)
	if !ok {
		t.Fatalf("the test Redis is a %T: with BIDGATE_TEST_REDIS_CLUSTER set, build with -tags rediscluster (make test-cluster)", e.rdb)
	}
	name := "cache-test-" + uuid.NewString()
	rdb := redis.NewClient(&redis.Options{Addr: single.Options().Addr, ClientName: name})
	t.Cleanup(func() { rdb.Close() }) // after the cache's cleanup
	ce := startCacheOn(t, e, rdb, CacheConfig{Size: 100, MaxAge: time.Hour})
	a := createAuction(t, ce.svc, false)
	ce.read(t, a.ID, 0)
	// A change nobody announces, as if its update had been lost.
	if _, err := ce.db.Exec(bg, `UPDATE auction SET current_price = 120, leader_id = 44, bid_count = 1 WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := ce.read(t, a.ID, 0); got.BidCount != 0 {
		t.Fatalf("before the reconnect the cache read the store: %+v", got)
	}
	if killed := killClient(t, single, name); killed != 1 {
		t.Fatalf("killed %d connections named %s", killed, name)
	}
	got := await.Until(t, 20*time.Second, "the auction read again after the reconnect", nil, func() (bidgate.Auction, bool) {
		a := ce.read(t, a.ID, 0)
		return a, a.BidCount == 1 && a.LeaderID == 44
	})
	if n := testutil.ToFloat64(ce.cache.metrics.drops.WithLabelValues("resubscribed")); n < 1 {
		t.Fatalf("read %+v, but no drop counted for the re-subscription", got)
	}
}

// A node whose pub/sub connection to Redis is killed subscribes its
// auctions again, and its viewers get the bids published meanwhile.
func TestResubscribesAfterRedisReconnect(t *testing.T) {
	e := newEnv(t)
	// The hub's own client, named so that the test can find its pub/sub
	// connection and kill only that.
	single, ok := e.rdb.(*redis.Client)
	if !ok {
		t.Fatalf("the test Redis is a %T: with BIDGATE_TEST_REDIS_CLUSTER set, build with -tags rediscluster (make test-cluster)", e.rdb)
	}
	name := "fanout-test-" + uuid.NewString()
	rdb := redis.NewClient(&redis.Options{Addr: single.Options().Addr, ClientName: name})
	t.Cleanup(func() { rdb.Close() }) // after the node's cleanup
	n := startNode(t, rdb, e.svc, Config{}, nodeOpts{})
	a := createAuction(t, e.svc, true)
	c := dial(t, n, a.ID)
	c.next(t, 5*time.Second)
	mustBid(t, e.svc, a.ID, 1, 110)
	c.until(t, 1, 5*time.Second)

	if killed := killClient(t, single, name); killed != 1 {
		t.Fatalf("killed %d connections named %s", killed, name)
	}
	// Bids right after the kill are published while the node is
	// reconnecting; the refresh after the resubscription brings them.
	mustBid(t, e.svc, a.ID, 2, 120)
	last := mustBid(t, e.svc, a.ID, 3, 130)
	got := c.until(t, last.Seq, 15*time.Second)
	if m := got[len(got)-1]; m.CurrentPrice != "130.00" || leader(m) != 3 {
		t.Fatalf("after the reconnect %+v", m)
	}
}

// killClient kills the connections of the named client and says how many.
func killClient(tb testing.TB, rdb *redis.Client, name string) int64 {
	tb.Helper()
	list, err := rdb.ClientList(bg).Result()
	if err != nil {
		tb.Fatal(err)
	}
	var killed int64
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				k, err := rdb.ClientKillByFilter(bg, "ID", id).Result()
				if err != nil {
					tb.Fatal(err)
				}
				killed += k
			}
		}
	}
	return killed
}
