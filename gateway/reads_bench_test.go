package gateway

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkCachedGet reads one hot and one cold auction through the HTTP
// server and its read cache, and, as the floor, a do-nothing fasthttp
// handler, with the same client and concurrency. cpu-ns/op is the
// process's CPU time (client and server) per request: the cached GETs'
// against the floor's is the cost of the API's read path.
func BenchmarkCachedGet(b *testing.B) {
	const clients = 8
	s := startCachedServerTB(b)
	cold := s.createAuction(validAuction())
	hot := s.createAuction(with(validAuction(), "hot", true))
	b.Run("floor", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusOK) }}
		go func() { _ = srv.Serve(ln) }()
		defer func() {
			if err := srv.Shutdown(); err != nil {
				b.Error(err)
			}
		}()
		runGetLoad(b, "http://"+ln.Addr().String()+"/auctions/1", clients)
	})
	for _, a := range []struct {
		name string
		id   int64
	}{{"cold", cold}, {"hot", hot}} {
		b.Run(a.name, func(b *testing.B) {
			runGetLoad(b, fmt.Sprintf("%s/auctions/%d", s.base, a.id), clients)
		})
	}
}

// runGetLoad sends b.N GETs of url from clients goroutines and reports the
// process's CPU time per request.
func runGetLoad(b *testing.B, url string, clients int) {
	host, _, _ := strings.Cut(strings.TrimPrefix(url, "http://"), "/")
	client := &fasthttp.HostClient{Addr: host, MaxConns: clients}
	defer client.CloseIdleConnections()
	per := b.N/clients + 1
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := processCPU(b)
	for range clients {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(url)
			for range per {
				if err := client.Do(req, resp); err != nil || resp.StatusCode() != fasthttp.StatusOK {
					b.Errorf("GET %s: %d %v", url, resp.StatusCode(), err)
					return
				}
			}
		})
	}
	wg.Wait()
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(per*clients), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
