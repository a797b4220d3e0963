package shard

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/persist/pgtest"
	"bidgate/persist/redisstore"
)

// TestFailoverKeepsAcknowledgedBids kills the primary that holds a hot
// auction with SIGKILL in the middle of a bid storm, lets the Redis Cluster
// promote its replica and keeps bidding. With --redis-wait-replicas 1 every
// acknowledged bid is in the new primary's log; without, the test reports
// how many were lost (Redis replicates asynchronously). Each run starts a
// cluster of its own (scripts/redis-cluster.sh): it runs under make
// test-cluster.
func TestFailoverKeepsAcknowledgedBids(t *testing.T) {
	if os.Getenv("BIDGATE_TEST_REDIS_CLUSTER") == "" {
		t.Skip("a Redis Cluster test: make test-cluster")
	}
	for i, wait := range []int{1, 0} {
		t.Run("wait="+strconv.Itoa(wait), func(t *testing.T) {
			acked, lost := failover(t, wait, 7400+20*i)
			t.Logf("--redis-wait-replicas %d: %d bids acknowledged, %d of them lost in the failover", wait, acked, lost)
			if wait > 0 && lost != 0 {
				t.Fatalf("%d acknowledged bids lost with WAIT", lost)
			}
		})
	}
}

// failover runs one storm with a primary killed in it and returns how many
// bids were acknowledged and how many of those the cluster lost.
func failover(t *testing.T, wait, port int) (acked, lost int) {
	cluster := pgtest.StartRedisCluster(t, port)
	rdb := cluster.Client(t)
	db, _ := pgtest.New(t, 8)
	s := New(db, rdb, Config{RateLimit: -1, PromoteRate: -1,
		Replication: redisstore.Replication{Replicas: wait, Timeout: time.Second}}, prometheus.NewRegistry())
	a := newHotAuction(t, s, "1000", "1", time.Hour, 0, time.Second)
	primary, err := rdb.MasterForKey(ctx, redisstore.KeysOf(a.ID).State)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		ackedBy = map[uuid.UUID]int64{} // request id -> seq
		next    atomic.Int64
		killed  atomic.Bool
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(30 * time.Second)
	for g := range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				n := len(ackedBy)
				mu.Unlock()
				if n >= 1500 {
					return
				}
				k := next.Add(1)
				r := bid(a.ID, int64(g+1)+8*k, bidgate.FromCents(100000+100*k).String())
				c, cancel := context.WithTimeout(ctx, 2*time.Second) // as --request-timeout does
				res, err := s.PlaceBid(c, r)
				cancel()
				switch {
				case err == nil && !res.Replayed:
					mu.Lock()
					ackedBy[r.RequestID] = res.Bid.Seq
					if len(ackedBy) == 500 && killed.CompareAndSwap(false, true) {
						if err := cluster.Kill(primary); err != nil {
							t.Errorf("kill the primary: %v", err)
						}
						wg.Go(func() {
							// Once a replica is promoted, the killed node
							// rejoins as its replica, so that WAIT 1 can be
							// met again.
							killed := primary.Options().Addr
							cluster.AwaitPromotion(t, rdb, killed, redisstore.KeysOf(a.ID).State)
							if err := cluster.Restart(killed); err != nil {
								t.Errorf("restart %s: %v", killed, err)
							}
						})
					}
					mu.Unlock()
				case err == nil, errors.Is(err, bidgate.ErrBidTooLow), errors.Is(err, bidgate.ErrUnavailable),
					errors.Is(err, context.DeadlineExceeded):
					// refused, or the cluster is failing over: nothing acknowledged
				default:
					t.Errorf("bid: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if !killed.Load() || len(ackedBy) < 1000 {
		t.Fatalf("killed %v, %d bids acknowledged: the storm did not outlive the failover", killed.Load(), len(ackedBy))
	}
	log, err := redisstore.NewReplicated(rdb, redisstore.Replication{}).ReadLog(context.Background(), a.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	inLog := make(map[string]bool, len(log))
	for _, b := range log {
		inLog[b.RequestID] = true
	}
	for req := range ackedBy {
		if !inLog[req.String()] {
			lost++
		}
	}
	return len(ackedBy), lost
}
