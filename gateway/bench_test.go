package gateway

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
)

// BenchmarkColdBid drives one cold auction through the real HTTP server with
// a fixed number of concurrent bidders, each bidding the next amount of a
// shared rising sequence. It reports throughput, the share accepted and the
// latency percentiles of all answers.
func BenchmarkColdBid(b *testing.B) {
	s, _ := startServer(b)
	for _, bidders := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("bidders=%d", bidders), func(b *testing.B) {
			id := s.createAuction(validAuction())
			runBidLoad(b, s.base, id, bidders, 1010, 10)
		})
	}
}

// runBidLoad splits b.N bids over bidders goroutines, bidding start,
// start+step, ... in issue order.
func runBidLoad(b *testing.B, base string, auction int64, bidders int, start, step int64) {
	client := &fasthttp.HostClient{Addr: strings.TrimPrefix(base, "http://"), MaxConns: bidders}
	url := fmt.Sprintf("%s/auctions/%d/bids", base, auction)
	var next, accepted, failed atomic.Int64
	latencies := make([][]time.Duration, bidders)
	var wg sync.WaitGroup
	b.ResetTimer()
	t0 := time.Now()
	for g := range bidders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				req.Reset()
				req.SetRequestURI(url)
				req.Header.SetMethod("POST")
				req.Header.Set("Idempotency-Key", uuid.NewString())
				req.SetBodyString(fmt.Sprintf(`{"bidderId":%d,"amount":%d}`, g+1, start+step*n))
				t := time.Now()
				err := client.Do(req, resp)
				latencies[g] = append(latencies[g], time.Since(t))
				switch {
				case err != nil:
					failed.Add(1)
				case resp.StatusCode() == 201:
					accepted.Add(1)
				case resp.StatusCode() != 409:
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "bids/s")
	b.ReportMetric(float64(accepted.Load())/elapsed.Seconds(), "accepted/s")
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d bids failed (neither 201 nor 409)", f, b.N)
	}
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
