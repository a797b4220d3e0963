//go:build rediscluster

package fanout

import (
	"errors"
	"testing"
	"time"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestViewersFollowAFailover: viewers of hot auctions on every primary of a
// Redis Cluster watch while the primary that holds one of them is killed
// with SIGKILL. Once its replica is promoted, the next bids of every auction
// reach their viewers, the killed primary's included: the node subscribed
// its auctions again on the new primary. The cluster is the test's own, so
// it runs under make test-cluster.
func TestViewersFollowAFailover(t *testing.T) {
	cluster := testredis.StartCluster(t, 7440)
	rdb := cluster.Client(t)
	db, _ := testdb.New(t, 8)
	svc := newShard(db, rdb)
	n := startNode(t, rdb, svc, Config{}, nodeOpts{})

	// Auctions until every primary holds one.
	var auctions []bidgate.Auction
	onPrimary := map[string]int64{}
	for len(onPrimary) < 3 {
		a := createAuction(t, svc, true)
		p, err := rdb.MasterForKey(bg, redisstore.Channel(a.ID))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := onPrimary[p.Options().Addr]; !ok {
			onPrimary[p.Options().Addr] = a.ID
			auctions = append(auctions, a)
		}
	}
	viewers := make([]*client, len(auctions))
	for i, a := range auctions {
		viewers[i] = dial(t, n, a.ID)
		viewers[i].next(t, 5*time.Second)
		mustBid(t, svc, a.ID, 1, 110)
		viewers[i].until(t, 1, 5*time.Second)
	}

	doomed, err := rdb.MasterForKey(bg, redisstore.Channel(auctions[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := testredis.Kill(doomed); err != nil {
		t.Fatal(err)
	}
	cluster.AwaitPromotion(t, rdb, doomed.Options().Addr, redisstore.Channel(auctions[0].ID))

	for i, a := range auctions {
		// The shard answers 503 until its own client has found the new
		// primary.
		b := await.Until(t, 20*time.Second, "a bid accepted after the failover", nil, func() (bidgate.Bid, bool) {
			res, err := placeBid(svc, a.ID, 2, 120)
			if err != nil && !errors.Is(err, bidgate.ErrUnavailable) {
				t.Fatalf("bid after the failover: %v", err)
			}
			return res.Bid, err == nil
		})
		got := viewers[i].until(t, b.Seq, 20*time.Second)
		if m := got[len(got)-1]; m.CurrentPrice != "120.00" || leader(m) != 2 {
			t.Fatalf("auction %d after the failover: %+v", a.ID, m)
		}
	}
	if lost := testutil.ToFloat64(n.hub.metrics.subscriptionsLost); lost < 1 {
		t.Fatalf("%v lost subscriptions counted", lost)
	}
}
