//go:build rediscluster

package shard

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// TestFailoverKeepsAcknowledgedBids cuts the replica of the primary that
// holds a hot auction off in the middle of a bid storm (as a partition
// would), kills the primary with SIGKILL 64 bid attempts later, lets the
// Redis Cluster promote the replica and keeps bidding. With
// --redis-wait-replicas 1 every acknowledged bid is in the new primary's
// log; without, the test reports how many were lost (Redis replicates
// asynchronously: what the old primary acknowledged alone is gone). Each
// run starts a cluster of its own (internal/testredis/redis-cluster.sh): it runs under
// make test-cluster.
func TestFailoverKeepsAcknowledgedBids(t *testing.T) {
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
	cluster := testredis.StartCluster(t, port)
	rdb := cluster.Client(t)
	db, _ := testdb.New(t, 8)
	s := New(db, rdb, Config{RateLimit: -1, PromoteRate: -1,
		Replication: redisstore.Replication{Replicas: wait, Timeout: 200 * time.Millisecond}}, prometheus.NewRegistry())
	a := newHotAuction(t, s, "1000", "1", time.Hour, 0, time.Second)
	primary, err := rdb.MasterForKey(ctx, redisstore.KeysOf(a.ID).State)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu       sync.Mutex
		ackedBy  = map[uuid.UUID]int64{} // request id -> seq
		next     atomic.Int64
		attempts int // bids answered, whatever the answer; guarded by mu
		cutAt    int // attempts when the replica was cut off; 0: not yet
		resume   func() error
		killed   bool
		wg       sync.WaitGroup
	)
	// fault moves the storm on: after 500 acknowledged bids the replica is
	// cut off, 64 attempts later the primary dies and the replica resumes.
	// mu is held.
	fault := func() {
		switch {
		case cutAt == 0 && len(ackedBy) >= 500:
			var err error
			if resume, err = testredis.IsolateReplica(primary); err != nil {
				t.Errorf("cut the replica off: %v", err)
				return
			}
			cutAt = attempts
		case cutAt > 0 && !killed && attempts >= cutAt+64:
			killed = true
			if err := testredis.Kill(primary); err != nil {
				t.Errorf("kill the primary: %v", err)
			}
			if err := resume(); err != nil {
				t.Errorf("resume the replica: %v", err)
			}
			wg.Go(func() {
				// Once the replica is promoted, the killed node rejoins
				// as its replica, so that WAIT 1 can be met again.
				addr := primary.Options().Addr
				cluster.AwaitPromotion(t, rdb, addr, redisstore.KeysOf(a.ID).State)
				if err := cluster.Restart(addr); err != nil {
					t.Errorf("restart %s: %v", addr, err)
				}
			})
		}
	}
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
				mu.Lock()
				attempts++
				if err == nil && !res.Replayed {
					ackedBy[r.RequestID] = res.Bid.Seq
				}
				fault()
				mu.Unlock()
				switch {
				case err == nil, errors.Is(err, bidgate.ErrBidTooLow), errors.Is(err, bidgate.ErrUnavailable),
					errors.Is(err, context.DeadlineExceeded):
					// acknowledged; or refused, or the cluster is failing over
				default:
					t.Errorf("bid: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if resume != nil {
		_ = resume() // the replica must not stay frozen if the test failed early
	}
	if !killed || len(ackedBy) < 1000 {
		t.Fatalf("killed %v, %d bids acknowledged: the storm did not outlive the failover", killed, len(ackedBy))
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
