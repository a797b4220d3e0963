package fanout

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"bidgate"
)

// BenchmarkHotAuctionViewers: one hot auction taking 2,000 bids/s (paced),
// watched by N WebSocket viewers on one node. b.N is seconds of load
// (-benchtime=5x: 5 s).
//
// The viewers run in a child process (this test binary again, see
// TestViewerProcess): a process may hold 20,000 files here and 10,000
// viewers need 20,000 sockets, and it keeps the viewers' CPU apart from the
// node's. "server" metrics are this process: hub, fasthttp, shard and the
// bidders (PostgreSQL and Redis run elsewhere). Lags are on this host's
// clock, which is also Redis's:
//   - bid-lag: from each accepted bid (its acceptedAt) to the moment each
//     viewer received a message showing it or a newer state. This includes
//     the coalescing wait (up to Interval).
//   - msg-lag: from the newest bid a message carries (its updatedAt) to its
//     receipt: the freshness of what a viewer sees.
func BenchmarkHotAuctionViewers(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("viewers=%d", n), func(b *testing.B) { benchViewers(b, n) })
	}
}

const benchBidRate = 2000 // bids per second

// BenchmarkFirstUpdate: the latency of the "first update at once" rule,
// from a bid's acceptance on a quiet auction (a new one, one viewer) to
// the viewer's receipt of its update.
func BenchmarkFirstUpdate(b *testing.B) {
	e := newEnv(b)
	n := startNode(b, e.rdb, e.svc, Config{}, nodeOpts{})
	var lag time.Duration
	for range b.N {
		b.StopTimer()
		a := createAuction(b, e.svc, false) // no bid: its snapshot is no flush
		c := dial(b, n, a.ID)
		c.next(b, 5*time.Second)
		b.StartTimer()
		mustBid(b, e.svc, a.ID, 3, 150)
		accepted := time.Now()
		if m := c.next(b, 10*time.Second); m.Seq != 1 {
			b.Fatalf("update %+v, want seq 1", m)
		}
		lag += time.Since(accepted)
		b.StopTimer()
		c.leave(b)
	}
	b.ReportMetric(float64(lag.Microseconds())/1000/float64(b.N), "ms-bid-to-viewer")
}

func benchViewers(b *testing.B, viewers int) {
	raiseFileLimit(b, uint64(viewers+2048))
	e := newEnv(b)
	n := startNode(b, e.rdb, e.svc, Config{MaxViewers: viewers}, nodeOpts{})
	a := createAuction(b, e.svc, true)
	child := startViewerProcess(b, n.url(a.ID), viewers)

	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		b.Fatal(err)
	}
	sentBefore := testutil.ToFloat64(n.hub.metrics.messagesSent)
	b.ResetTimer()
	child.send(b, "start")
	began := time.Now()
	accepted := bidAtRate(b, e, a.ID, b.N*benchBidRate, benchBidRate)
	loadTime := time.Since(began)
	final, err := e.svc.Auction(bg, a.ID)
	if err != nil {
		b.Fatal(err)
	}
	times := make([]int64, final.BidCount+1) // by seq
	for _, bid := range accepted {
		times[bid.Seq] = bid.AcceptedAt.UnixNano()
	}
	order, err := json.Marshal(finishOrder{FinalSeq: final.BidCount, AcceptedAt: times})
	if err != nil {
		b.Fatal(err)
	}
	child.send(b, string(order))
	res := child.result(b)
	b.StopTimer()
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		b.Fatal(err)
	}
	sent := testutil.ToFloat64(n.hub.metrics.messagesSent) - sentBefore

	secs := loadTime.Seconds()
	b.ReportMetric(res.BidLag[0], "p50-bid-lag-ms")
	b.ReportMetric(res.BidLag[1], "p99-bid-lag-ms")
	b.ReportMetric(res.BidLag[2], "max-bid-lag-ms")
	b.ReportMetric(res.MsgLag[0], "p50-msg-lag-ms")
	b.ReportMetric(res.MsgLag[1], "p99-msg-lag-ms")
	b.ReportMetric(sent/secs, "msgs/s")
	b.ReportMetric(float64(len(accepted))/secs, "bids/s")
	b.ReportMetric(cpuSeconds(after)-cpuSeconds(before), "server-cpu-s")
	b.ReportMetric(float64(after.Maxrss)/1024, "server-maxrss-MB") // Linux: kilobytes
	b.ReportMetric(res.CPUSeconds, "viewers-cpu-s")
	b.ReportMetric(res.MaxRSSMB, "viewers-maxrss-MB")
	b.ReportMetric(0, "ns/op")
}

// bidAtRate places total rising bids, bid i due at i/rate seconds, from 32
// bidders at once, and returns the accepted ones (the others lost a race
// and were too low).
func bidAtRate(b *testing.B, e *env, id int64, total, rate int) []bidgate.Bid {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		accepted []bidgate.Bid
		wg       sync.WaitGroup
	)
	start := time.Now()
	for w := range 32 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate)))) // pacing
				res, err := placeBid(e.svc, id, int64(w+1), 101+i)
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, res.Bid)
					mu.Unlock()
				case !errors.Is(err, bidgate.ErrBidTooLow) && !errors.Is(err, bidgate.ErrAlreadyLeading):
					b.Errorf("bid %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return accepted
}

func cpuSeconds(r syscall.Rusage) float64 {
	return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
}

// raiseFileLimit makes room for need open files, or skips.
func raiseFileLimit(tb testing.TB, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Cur >= need {
		return
	}
	lim.Cur, lim.Max = need, max(lim.Max, need)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Skipf("need %d open files (ulimit -n): %v", need, err)
	}
}

// The protocol with the viewer process: it prints readyLine once every
// viewer has its snapshot; it is sent "start" when the load begins, then a
// finishOrder; it answers resultLine and a viewerResult.
const (
	envURL     = "FANOUT_BENCH_URL"
	envViewers = "FANOUT_BENCH_VIEWERS"
	readyLine  = "fanout-bench-ready"
	resultLine = "fanout-bench-result "
)

type finishOrder struct {
	FinalSeq   int64   `json:"finalSeq"`
	AcceptedAt []int64 `json:"acceptedAt"` // unix ns by seq; 0 for unknown
}

type viewerResult struct {
	Err        string     `json:"err,omitempty"`
	BidLag     [3]float64 `json:"bidLag"` // p50, p99, max in ms
	MsgLag     [3]float64 `json:"msgLag"`
	Messages   int64      `json:"messages"`
	CPUSeconds float64    `json:"cpuSeconds"`
	MaxRSSMB   float64    `json:"maxRssMB"`
}

type viewerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startViewerProcess(b *testing.B, url string, viewers int) *viewerProcess {
	cmd := exec.Command(os.Args[0], "-test.run=^TestViewerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envURL+"="+url, envViewers+"="+strconv.Itoa(viewers))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &viewerProcess{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	p.lines.Buffer(nil, 1<<20)
	b.Cleanup(func() {
		if err := stdin.Close(); err != nil {
			b.Errorf("close the viewer process's stdin: %v", err)
		}
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			b.Errorf("kill the viewer process: %v", err)
		}
		_ = cmd.Wait() // killed: its status is the signal
	})
	p.await(b, readyLine)
	return p
}

func (p *viewerProcess) send(b *testing.B, line string) {
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		b.Fatalf("tell the viewer process: %v", err)
	}
}

// await returns the rest of the first line that starts with prefix.
func (p *viewerProcess) await(b *testing.B, prefix string) string {
	for p.lines.Scan() {
		if rest, ok := strings.CutPrefix(p.lines.Text(), prefix); ok {
			return rest
		}
	}
	b.Fatalf("the viewer process ended before %q: %v", prefix, p.lines.Err())
	return ""
}

func (p *viewerProcess) result(b *testing.B) viewerResult {
	var r viewerResult
	if err := json.Unmarshal([]byte(p.await(b, resultLine)), &r); err != nil {
		b.Fatal(err)
	}
	if r.Err != "" {
		b.Fatalf("viewer process: %s", r.Err)
	}
	return r
}

// TestViewerProcess is the viewers' side of BenchmarkHotAuctionViewers; it
// returns at once (a pass, not a skip) unless started by it.
func TestViewerProcess(t *testing.T) {
	url := os.Getenv(envURL)
	if url == "" {
		return
	}
	count, err := strconv.Atoi(os.Getenv(envViewers))
	if err != nil {
		t.Fatalf("%s: %v", envViewers, err)
	}
	orders := bufio.NewScanner(os.Stdin)
	orders.Buffer(nil, 64<<20) // the finish order lists every bid
	res, err := runViewers(url, count, orders)
	if err != nil {
		res.Err = err.Error()
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(resultLine + string(out))
}

// benchViewer is a viewer that notes, for every message, the seqs it newly
// covers and when it arrived.
type benchViewer struct {
	conn    *websocket.Conn
	seq     atomic.Int64
	target  atomic.Int64
	reached chan struct{}
	once    sync.Once
	mu      sync.Mutex
	got     []receipt
}

type receipt struct {
	from, to int64 // seqs from+1..to are new in this message
	at       int64 // unix ns of receipt
	fresh    int64 // unix ns of the message's updatedAt, 0 if none
}

func runViewers(url string, count int, orders *bufio.Scanner) (viewerResult, error) {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < uint64(count+1024) {
		lim.Cur = min(lim.Max, uint64(count+1024))
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) // best effort: connectViewers says if it was not enough
	}
	viewers, err := connectViewers(url, count)
	defer func() {
		for _, v := range viewers {
			if v != nil {
				_ = v.conn.Close()
			}
		}
	}()
	if err != nil {
		return viewerResult{}, err
	}
	fmt.Println(readyLine)

	var before, after syscall.Rusage
	if !orders.Scan() || orders.Text() != "start" {
		return viewerResult{}, errors.New("no start")
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		return viewerResult{}, err
	}
	if !orders.Scan() {
		return viewerResult{}, errors.New("no finish order")
	}
	var order finishOrder
	if err := json.Unmarshal(orders.Bytes(), &order); err != nil {
		return viewerResult{}, err
	}
	deadline := time.After(30 * time.Second)
	for i, v := range viewers {
		v.target.Store(order.FinalSeq)
		if v.seq.Load() >= order.FinalSeq {
			continue
		}
		select {
		case <-v.reached:
		case <-deadline:
			return viewerResult{}, fmt.Errorf("viewer %d at seq %d, not %d, 30 s after the load", i, v.seq.Load(), order.FinalSeq)
		}
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		return viewerResult{}, err
	}

	var bidLag, msgLag lagHistogram
	var messages int64
	for _, v := range viewers {
		v.mu.Lock()
		for _, r := range v.got {
			messages++
			if r.fresh != 0 {
				msgLag.add(r.at - r.fresh)
			}
			for s := max(r.from+1, 1); s <= r.to && s < int64(len(order.AcceptedAt)); s++ {
				if at := order.AcceptedAt[s]; at != 0 {
					bidLag.add(r.at - at)
				}
			}
		}
		v.mu.Unlock()
	}
	return viewerResult{
		BidLag: bidLag.summary(), MsgLag: msgLag.summary(), Messages: messages,
		CPUSeconds: cpuSeconds(after) - cpuSeconds(before), MaxRSSMB: float64(after.Maxrss) / 1024,
	}, nil
}

func connectViewers(url string, count int) ([]*benchViewer, error) {
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 256}
	viewers := make([]*benchViewer, count)
	var (
		wg         sync.WaitGroup
		next       atomic.Int64
		mu         sync.Mutex
		firstError error
	)
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				mu.Lock()
				failed := firstError != nil
				mu.Unlock()
				if i >= count || failed {
					return
				}
				conn, _, err := dialer.Dial(url, nil)
				if err == nil {
					v := &benchViewer{conn: conn, reached: make(chan struct{})}
					v.target.Store(1 << 62)
					if _, _, err = conn.ReadMessage(); err == nil { // the snapshot
						viewers[i] = v
						go v.read()
						continue
					}
					conn.Close()
				}
				mu.Lock()
				firstError = errors.Join(firstError, fmt.Errorf("viewer %d: %w", i, err))
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	return viewers, firstError
}

func (v *benchViewer) read() {
	for {
		_, p, err := v.conn.ReadMessage()
		if err != nil {
			return
		}
		now := time.Now().UnixNano()
		seq, updatedAt, ok := seqAndTime(p)
		if !ok {
			return
		}
		r := receipt{from: v.seq.Load(), to: seq, at: now}
		if at, err := time.Parse(time.RFC3339Nano, updatedAt); err == nil {
			r.fresh = at.UnixNano()
		}
		v.mu.Lock()
		v.got = append(v.got, r)
		v.mu.Unlock()
		v.seq.Store(seq)
		if seq >= v.target.Load() {
			v.once.Do(func() { close(v.reached) })
		}
	}
}

// seqAndTime picks seq and updatedAt out of a message without a full
// decode, so that the viewers take as little of the machine's CPU as they
// can from the node being measured.
func seqAndTime(p []byte) (seq int64, updatedAt string, ok bool) {
	s := string(p)
	_, rest, ok := strings.Cut(s, `"seq":`)
	if !ok {
		return 0, "", false
	}
	end := strings.IndexAny(rest, ",}")
	if end < 0 {
		return 0, "", false
	}
	seq, err := strconv.ParseInt(rest[:end], 10, 64)
	if err != nil {
		return 0, "", false
	}
	if _, rest, found := strings.Cut(s, `"updatedAt":"`); found {
		updatedAt, _, _ = strings.Cut(rest, `"`)
	}
	return seq, updatedAt, true
}

// lagHistogram counts lags in 0.1 ms steps up to 10 s: exact enough for
// quantiles over tens of millions of samples without keeping them.
type lagHistogram struct {
	counts [100001]int64
	n      int64
	maxNs  int64
}

func (h *lagHistogram) add(ns int64) {
	ns = max(ns, 0)
	h.counts[min(ns/100_000, int64(len(h.counts)-1))]++
	h.n++
	h.maxNs = max(h.maxNs, ns)
}

// summary is p50, p99 and max in milliseconds.
func (h *lagHistogram) summary() [3]float64 {
	q := func(p float64) float64 {
		want, seen := int64(p*float64(h.n)), int64(0)
		for i, c := range h.counts {
			if seen += c; seen > want {
				return float64(i) / 10
			}
		}
		return float64(h.maxNs) / 1e6
	}
	if h.n == 0 {
		return [3]float64{}
	}
	return [3]float64{q(.50), q(.99), float64(h.maxNs) / 1e6}
}
