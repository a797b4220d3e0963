package shard

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

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
			keys := hotKeys(a.ID)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for range tc.callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					args := make([]any, 0, 3*tc.batch)
					for {
						args = args[:0]
						for range tc.batch {
							n := next.Add(1)
							args = append(args, uuid.NewString(), strconv.FormatInt(n, 10), 101000+1000*n)
						}
						if next.Load() > int64(b.N)+int64(tc.batch) {
							return
						}
						if err := bidBatchScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
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
