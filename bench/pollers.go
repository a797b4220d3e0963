package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// pollWorkers is how many polls may be in flight at once; a poll that
// waits for one has the wait in its latency (open loop).
const pollWorkers = 64

// PollersResult is what the pollers' GET /auctions/{id} got.
type PollersResult struct {
	Offered        float64 `json:"offeredPerSecond"`
	Sent           int64   `json:"sent"`
	OK             int64   `json:"status200"`
	NotModified    int64   `json:"status304"`
	Other          int64   `json:"otherStatus"` // any other status
	Errors         int64   `json:"transportErrors"`
	ETags          int64   `json:"answersWithETag"` // 200s that carried an ETag
	AnsweredPerSec float64 `json:"answeredPerSecond"`
	// Latency of every answer, from its intended send time.
	Latency Latency `json:"latency"`
}

// pollKey is one (target, auction): the ETag a poller revalidates with is
// the last one that node gave for that auction.
type pollKey struct {
	target  int
	auction int64
}

// poller sends the polls of one run.
type poller struct {
	targets  []Target
	auctions []int64
	clients  []*fasthttp.HostClient
	timeout  time.Duration

	mu    sync.Mutex
	etags map[pollKey][]byte
	hist  *hdrhistogram.Histogram

	next                                     atomic.Uint64
	sent, ok, notModified, other, errs, tags atomic.Int64
}

// poll sends rate GET /auctions/{id} a second from start for d (open
// loop: each at its intended time, latency counted from it), round-robin
// over the targets and the auctions, each with If-None-Match of the last
// ETag that node gave for that auction (none before the first, or when no
// node sends ETags). It returns when every poll is answered or ctx ends.
func (e *Env) poll(ctx context.Context, rate float64, start time.Time, d time.Duration, auctions []int64) *PollersResult {
	p := &poller{targets: e.targets, auctions: auctions, timeout: e.opt.Loader.Timeout,
		etags: map[pollKey][]byte{}, hist: newHist(3)}
	for _, t := range e.targets {
		p.clients = append(p.clients, newHostClient(t, pollWorkers))
	}
	defer func() {
		for _, c := range p.clients {
			c.CloseIdleConnections()
		}
	}()
	count := int(rate * d.Seconds())
	due := make(chan time.Time, pollWorkers)
	var wg sync.WaitGroup
	for range pollWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for at := range due {
				p.do(req, resp, at)
			}
		}()
	}
	timer := time.NewTimer(time.Hour)
	for i := range count {
		at := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case due <- at:
		case <-ctx.Done():
		}
	}
	timer.Stop()
	close(due)
	wg.Wait()
	return p.result(rate, start)
}

// do sends one poll intended at at.
func (p *poller) do(req *fasthttp.Request, resp *fasthttp.Response, at time.Time) {
	i := int(p.next.Add(1) - 1)
	k := pollKey{target: i % len(p.targets)}
	k.auction = p.auctions[(i/len(p.targets))%len(p.auctions)]
	req.Reset()
	resp.Reset()
	req.SetRequestURI(p.targets[k.target].Base + "/auctions/" + strconv.FormatInt(k.auction, 10))
	req.Header.SetMethod(fasthttp.MethodGet)
	p.mu.Lock()
	if tag := p.etags[k]; tag != nil {
		req.Header.SetBytesV(fasthttp.HeaderIfNoneMatch, tag)
	}
	p.mu.Unlock()
	p.sent.Add(1)
	err := p.clients[k.target].DoTimeout(req, resp, p.timeout)
	end := time.Now()
	if err != nil {
		p.errs.Add(1)
		return
	}
	switch resp.StatusCode() {
	case fasthttp.StatusOK:
		p.ok.Add(1)
		if tag := resp.Header.Peek(fasthttp.HeaderETag); len(tag) > 0 {
			p.tags.Add(1)
			p.mu.Lock()
			p.etags[k] = append(p.etags[k][:0], tag...)
			p.mu.Unlock()
		}
	case fasthttp.StatusNotModified:
		p.notModified.Add(1)
	default:
		p.other.Add(1)
	}
	p.mu.Lock()
	recordLatency(p.hist, end.Sub(earliest(at, end)))
	p.mu.Unlock()
}

func (p *poller) result(rate float64, start time.Time) *PollersResult {
	r := &PollersResult{Offered: rate, Sent: p.sent.Load(), OK: p.ok.Load(), NotModified: p.notModified.Load(),
		Other: p.other.Load(), Errors: p.errs.Load(), ETags: p.tags.Load()}
	p.mu.Lock()
	r.Latency = latencyOf(p.hist)
	p.mu.Unlock()
	if span := time.Since(start).Seconds(); span > 0 {
		r.AnsweredPerSec = float64(r.OK+r.NotModified+r.Other) / span
	}
	return r
}

// Sentence is p in words, for the reports.
func (p *PollersResult) Sentence() string {
	s := fmt.Sprintf("%.0f GET/s offered, %d sent, %.0f/s answered: %d 200 (%d with an ETag), %d 304, %d other, %d transport errors; "+
		"p50 %.2f ms, p99 %.2f ms, max %.2f ms", p.Offered, p.Sent, p.AnsweredPerSec, p.OK, p.ETags, p.NotModified, p.Other, p.Errors,
		p.Latency.P50, p.Latency.P99, p.Latency.Max)
	if p.ETags == 0 {
		s += " (the nodes sent no ETag: every poll was a plain GET)"
	}
	return s
}
