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

	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/internal/testredis"
)

// BenchmarkCluster runs one mixed load (200 cold auctions and 2 hot ones,
// three bids in four on the hot ones) from 64 clients spread over every
// node, on a single node and on a three-node in-process cluster, and
// reports bids/s, p50/p99 and the mean forwarding round trip.
func BenchmarkCluster(b *testing.B) {
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			db, _ := testdb.New(b, 48)
			rdb := testredis.Client(b)
			nodes := []*testNode{startNode(b, "n1", db, rdb)}
			for i := 2; i <= size; i++ {
				nodes = append(nodes, startNode(b, fmt.Sprintf("n%d", i), db, rdb, nodes[0].ring.Addr()))
			}
			converge(b, size, nodes...)
			var auctions []int64
			for i := range 202 {
				auctions = append(auctions, nodes[0].createAuction(with(validAuction(), "hot", i < 2)))
			}
			clients := make([]*fasthttp.HostClient, len(nodes))
			for i, n := range nodes {
				clients[i] = &fasthttp.HostClient{Addr: strings.TrimPrefix(n.base, "http://"), MaxConns: 64}
			}
			auths := bidderTokens(b, nextBidder.Add(int64(b.N))-int64(b.N), b.N)
			var next atomic.Int64
			lat := make([][]time.Duration, 64)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := range 64 {
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
						a := auctions[n%2]
						if n%4 == 0 {
							a = auctions[2+n%200]
						}
						c := clients[n%int64(len(clients))]
						req.Reset()
						req.SetRequestURI(fmt.Sprintf("http://%s/auctions/%d/bids", c.Addr, a))
						req.Header.SetMethod("POST")
						req.Header.Set("Idempotency-Key", uuid.NewString())
						req.Header.Set("Authorization", auths[n])
						req.SetBodyString(fmt.Sprintf(`{"amount":%d}`, 1010+10*n))
						t0 := time.Now()
						if err := c.Do(req, resp); err != nil || resp.StatusCode() >= 500 {
							b.Errorf("bid: %v %d", err, resp.StatusCode())
							return
						}
						lat[g] = append(lat[g], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "bids/s")
			b.ReportMetric(ms(percentile(all, 0.5)), "p50-ms")
			b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
			var sum, count float64
			for _, n := range nodes {
				s, c := testmetrics.Histogram(b, n.reg, "bidgate_forward_duration_seconds")
				sum, count = sum+s, count+c
			}
			if count > 0 {
				b.ReportMetric(sum/count*1000, "fwd-ms")
				b.ReportMetric(count/float64(b.N), "forwarded/bid")
			}
		})
	}
}
