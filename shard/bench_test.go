package shard

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// BenchmarkHotScriptRaw is the baseline for the HTTP benchmarks: the hot bid
// script called straight from Go, one bid per call (batch=1) or a batch per
// call, by concurrent callers, with no HTTP, cache or rate limit. Bids rise
// by 30.00. With proxy=3 every third bid is a proxy bid with a maximum 50.00
// above its turn's amount: the next bid is answered by an automatic row, the
// one after outbids it, so every bid is still accepted.
func BenchmarkHotScriptRaw(b *testing.B) {
	db, _ := testdb.New(b, 4)
	s := New(db, testredis.Client(b), Config{}, prometheus.NewRegistry())
	for _, tc := range []struct{ callers, batch, proxy int }{
		{1, 1, 0}, {64, 1, 0}, {1, 100, 0}, {64, 1, 3}, {1, 100, 3},
	} {
		b.Run(fmt.Sprintf("callers=%d/batch=%d/proxy=%d", tc.callers, tc.batch, tc.proxy), func(b *testing.B) {
			a := newHotAuction(b, s, "1000", "10", time.Hour, 0, time.Second)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for range tc.callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					reqs := make([]bidgate.BidRequest, tc.batch)
					for {
						for i := range reqs {
							n := next.Add(1)
							reqs[i] = bidgate.BidRequest{AuctionID: a.ID, BidderID: n, RequestID: uuid.New(),
								Amount: bidgate.FromCents(101000 + 3000*n)}
							if tc.proxy > 0 && n%int64(tc.proxy) == 0 {
								reqs[i].Proxy, reqs[i].Amount = true, bidgate.FromCents(106000+3000*n)
							}
						}
						if next.Load() > int64(b.N)+int64(tc.batch) {
							return
						}
						if _, _, err := s.rs.DecideBids(ctx, a.ID, reqs); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(next.Load())/time.Since(t0).Seconds(), "bids/s")
		})
	}
}

// BenchmarkHotScriptWait is the cost of --redis-wait-replicas 1: the bid
// script, one batch per call, with and without the WAIT that follows it on
// the primary's connection. It needs replicas: run it under make
// test-cluster's cluster (BIDGATE_TEST_REDIS_CLUSTER).
func BenchmarkHotScriptWait(b *testing.B) {
	rdb := testredis.Client(b)
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		b.Skip("needs a Redis Cluster with replicas (BIDGATE_TEST_REDIS_CLUSTER)")
	}
	db, _ := testdb.New(b, 4)
	s := New(db, rdb, Config{}, prometheus.NewRegistry())
	for _, batch := range []int{1, 16, 100} {
		for _, wait := range []int{0, 1} {
			b.Run(fmt.Sprintf("batch=%d/wait=%d", batch, wait), func(b *testing.B) {
				rs := redisstore.NewReplicated(rdb, redisstore.Replication{Replicas: wait, Timeout: time.Second})
				a := newHotAuction(b, s, "1000", "10", time.Hour, 0, time.Second)
				reqs := make([]bidgate.BidRequest, batch)
				n := int64(0)
				b.ResetTimer()
				for range b.N {
					for i := range reqs {
						n++
						reqs[i] = bidgate.BidRequest{AuctionID: a.ID, BidderID: n, RequestID: uuid.New(),
							Amount: bidgate.FromCents(101000 + 1000*n)}
					}
					if _, _, err := rs.DecideBids(ctx, a.ID, reqs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "bids/s")
			})
		}
	}
}
