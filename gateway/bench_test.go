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

	"bidgate/internal/auth"
	"bidgate/internal/testmetrics"
	"bidgate/shard"
)

// BenchmarkColdBid drives one cold auction through the real HTTP server with
// a fixed number of concurrent clients, each bidding the next amount of a
// shared rising sequence. It reports throughput, the share accepted and the
// latency percentiles of all answers. Bids come from a pool of bidderPool
// bidders in turn, so the token bucket (default 5/s) runs but never limits,
// and each bidder's bearer token (minted before the clock starts) is
// verified once, then served from the server's token cache, as for bidders
// who bid more than once.
func BenchmarkColdBid(b *testing.B) {
	s, _ := startServerWith(b, shard.Config{PromoteRate: -1})
	for _, clients := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("bidders=%d", clients), func(b *testing.B) {
			id := s.createAuction(validAuction())
			runBidLoad(b, s.base, id, clients, 1010, 10)
		})
	}
}

// BenchmarkHotBid is the same load on one hot auction, batched (up to 256
// bids per script call) and unbatched (1), with the mean batch size seen.
func BenchmarkHotBid(b *testing.B) {
	for _, batch := range []int{256, 1} {
		s, _ := startServerWith(b, shard.Config{MaxBatch: batch, MaxQueue: 16384})
		for _, clients := range []int{64, 256} {
			b.Run(fmt.Sprintf("batch=%d/bidders=%d", batch, clients), func(b *testing.B) {
				id := s.createAuction(with(validAuction(), "hot", true))
				sumBefore, callsBefore := testmetrics.Histogram(b, s.reg, "bidgate_hot_batch_size")
				runBidLoad(b, s.base, id, clients, 1010, 10)
				sum, calls := testmetrics.Histogram(b, s.reg, "bidgate_hot_batch_size")
				if calls -= callsBefore; calls > 0 {
					b.ReportMetric((sum-sumBefore)/calls, "bids/batch")
				}
			})
		}
	}
}

// bidderPool is how many bidders a benchmark round's bids come from in
// turn; each round takes fresh ones (nextBidder), so no bidder's token
// bucket carries over from the round before.
const bidderPool = 8192

var nextBidder atomic.Int64

// runBidLoad splits b.N bids over clients goroutines, bidding start,
// start+step, ... in issue order, from the bidders of the pool in turn.
func runBidLoad(b *testing.B, base string, auction int64, clients int, start, step int64) {
	client := &fasthttp.HostClient{Addr: strings.TrimPrefix(base, "http://"), MaxConns: clients}
	// Rounds follow each other at once: a round's connections must not
	// linger into the next, or together they pass the server's
	// --max-conns-per-ip (1024).
	defer client.CloseIdleConnections()
	pool := min(b.N, bidderPool)
	auths := bidderTokens(b, nextBidder.Add(int64(pool))-int64(pool), pool)
	url := fmt.Sprintf("%s/auctions/%d/bids", base, auction)
	var next, accepted, failed, limited atomic.Int64
	latencies := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	b.ResetTimer()
	t0 := time.Now()
	for g := range clients {
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
				req.Header.Set("Authorization", auths[(n-1)%int64(len(auths)-1)+1])
				req.SetBodyString(fmt.Sprintf(`{"amount":%d}`, start+step*n))
				t := time.Now()
				err := client.Do(req, resp)
				latencies[g] = append(latencies[g], time.Since(t))

				switch {
				case err != nil:
					failed.Add(1)
				case resp.StatusCode() == 201:
					accepted.Add(1)
				case resp.StatusCode() == 429:
					limited.Add(1)
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
	if l := limited.Load(); l > 0 {
		b.Fatalf("%d bids rate limited: the benchmark would measure the limiter", l)
	}
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d bids failed (neither 201 nor 409)", f, b.N)
	}
}

// bidderTokens is the Authorization header of bidders 1 to n, at index n.
// bidderTokens are the Authorization headers of bidders first+1..first+n,
// at indexes 1..n.
func bidderTokens(b *testing.B, first int64, n int) []string {
	b.Helper()
	auths := make([]string, n+1)
	for i := 1; i <= n; i++ {
		auths[i] = "Bearer " + token(b, first+int64(i), auth.ScopeBid)
	}
	return auths
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
