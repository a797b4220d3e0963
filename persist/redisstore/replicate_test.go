package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// TestWaitForReplicas: with a replica to wait for, a batch is answered
// once the replica holds it (on a Redis Cluster, make test-cluster); with
// none (the single test Redis), its bidders get ErrUnavailable after the
// timeout, and a retry with the same key tells that the bid was kept.
func TestWaitForReplicas(t *testing.T) {
	rdb := testredis.Client(t)
	_, cluster := rdb.(*redis.ClusterClient)
	plain := redisstore.New(rdb)
	a := scratch(t, plain)
	rs := redisstore.NewReplicated(rdb, redisstore.Replication{Replicas: 1, Timeout: 100 * time.Millisecond})
	r := bidgate.BidRequest{AuctionID: a.ID, BidderID: 2, Amount: decimal.NewFromInt(150), RequestID: uuid.New()}
	_, out, err := rs.DecideBids(ctx, a.ID, []bidgate.BidRequest{r})
	switch {
	case cluster && (err != nil || out[0].Err != nil):
		t.Fatalf("on a cluster with replicas: %+v, %v", out, err)
	case !cluster && (!errors.Is(err, bidgate.ErrUnavailable) || !errors.Is(err, redisstore.ErrNotReplicated)):
		t.Fatalf("with no replica: %v, want ErrUnavailable (not replicated)", err)
	}
	// Whatever the answer, the decision was made: the same key is a replay.
	_, out, err = plain.DecideBids(ctx, a.ID, []bidgate.BidRequest{r})
	if err != nil || out[0].Err != nil || !out[0].Result.Replayed || out[0].Result.Bid.Seq != 1 {
		t.Fatalf("the retry: %+v, %v", out, err)
	}
	// So do batches of several auctions, decided in one round trip.
	b := scratch(t, plain)
	batches := []redisstore.Batch{{AuctionID: a.ID, Reqs: []bidgate.BidRequest{
		{AuctionID: a.ID, BidderID: 4, Amount: decimal.NewFromInt(160), RequestID: uuid.New()}}},
		{AuctionID: b.ID, Reqs: []bidgate.BidRequest{{AuctionID: b.ID, BidderID: 4, Amount: decimal.NewFromInt(160), RequestID: uuid.New()}}}}
	for i, x := range rs.DecideBatches(ctx, batches) {
		switch {
		case cluster && (x.Err != nil || x.Decisions[0].Err != nil):
			t.Fatalf("batch %d on a cluster with replicas: %+v", i, x)
		case !cluster && (!errors.Is(x.Err, bidgate.ErrUnavailable) || !errors.Is(x.Err, redisstore.ErrNotReplicated)):
			t.Fatalf("batch %d with no replica: %v, want ErrUnavailable (not replicated)", i, x.Err)
		}
	}
	for i, x := range plain.DecideBatches(ctx, batches) {
		if x.Err != nil || x.Decisions[0].Err != nil || !x.Decisions[0].Result.Replayed {
			t.Fatalf("batch %d retried: %+v", i, x)
		}
	}
	// A buy-now waits too (this one is refused: a bid is in).
	d, err := rs.BuyNow(ctx, bidgate.BidRequest{AuctionID: a.ID, BidderID: 3, BuyNow: true, RequestID: uuid.New()})
	switch {
	case cluster && !errors.Is(d.Err, bidgate.ErrBuyNowUnavailable):
		t.Fatalf("buy-now on a cluster: %+v, %v", d, err)
	case !cluster && !errors.Is(err, redisstore.ErrNotReplicated):
		t.Fatalf("buy-now with no replica: %v", err)
	}
}

// BenchmarkWaitReplicated is what a log reader's pass pays for
// --redis-wait-replicas 1: a fence write and WAIT on each primary that holds
// one of the pass's auctions (one primary, or all three of the test
// cluster). It needs replicas: run it under make test-cluster's cluster
// (BIDGATE_TEST_REDIS_CLUSTER).
func BenchmarkWaitReplicated(b *testing.B) {
	rdb := testredis.Client(b)
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		b.Skip("needs a Redis Cluster with replicas (BIDGATE_TEST_REDIS_CLUSTER)")
	}
	rs := redisstore.NewReplicated(rdb, redisstore.Replication{Replicas: 1, Timeout: time.Second})
	for _, n := range []int{1, 64} {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = int64(900_000 + i) // 64 hash tags land on every primary
		}
		b.Run(fmt.Sprintf("auctions=%d", n), func(b *testing.B) {
			for b.Loop() {
				if err := rs.WaitReplicated(ctx, ids...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
