package shard

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/persist/pgtest"
)

// BenchmarkHotScriptRaw is the baseline for the HTTP benchmarks: the hot bid
// script called straight from Go, one bid per call (batch=1) or a batch per
// call, by concurrent callers, with no HTTP, cache or rate limit.
func BenchmarkHotScriptRaw(b *testing.B) {
	db, _ := pgtest.New(b, 4)
	s := New(db, pgtest.Redis(b), Config{}, prometheus.NewRegistry())
	for _, tc := range []struct{ callers, batch int }{{1, 1}, {64, 1}, {1, 100}} {
		b.Run(fmt.Sprintf("callers=%d/batch=%d", tc.callers, tc.batch), func(b *testing.B) {
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
								Amount: bidgate.FromCents(101000 + 1000*n)}
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
