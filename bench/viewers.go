package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/fasthttp/websocket"
)

// ViewerConfig is how a run watches its hot auctions over WebSocket.
type ViewerConfig struct {
	Viewers int
	// ConnectRate bounds new connections per second, so that thousands of
	// viewers connect without a SYN flood.
	ConnectRate float64
	// PerSource is how many viewers share one loopback source address
	// (127.0.0.1, .2, ...): bidgate takes at most --ws-max-viewers-per-ip
	// (256) from one address. 0 leaves the source to the system.
	PerSource int
}

const (
	// viewerHandshake bounds one viewer's connection and upgrade.
	viewerHandshake = 10 * time.Second
	// viewerGrace is how long viewers may still take, once the pipeline
	// has drained (every auction CLOSED in PostgreSQL), to get their
	// closed message.
	viewerGrace = 10 * time.Second
	// lagShards spreads the viewers' lag histogram over locks.
	lagShards = 16
)

// watch is a run's WebSocket viewers: each connects (paced), reads until
// its auction's closed message or until the harness stops it, and keeps a
// ViewerLog.
type watch struct {
	cfg      ViewerConfig
	targets  []Target
	auctions []int64
	ctx      context.Context
	cancel   context.CancelFunc
	logs     []ViewerLog
	ok       []bool // the viewer connected
	shards   [lagShards]lagShard

	delivered atomic.Int64
	unstamped atomic.Int64 // messages without updatedAt (the snapshot)
	connected atomic.Int64
	stopping  atomic.Bool

	mu       sync.Mutex
	failures map[string]int
	firstErr string
	conns    map[int]*websocket.Conn

	connecting sync.WaitGroup
	reading    sync.WaitGroup

	// measured is what the scenario measured around the viewers: the
	// connect time, the nodes' memory and CPU.
	measured ViewersResult
}

// lagShard is a part of the viewers' delivery lag histogram and the span
// of their messages.
type lagShard struct {
	mu          sync.Mutex
	h           *hdrhistogram.Histogram
	first, last time.Time
}

func (s *lagShard) add(now time.Time, lag time.Duration, stamped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stamped {
		recordLatency(s.h, max(0, lag))
	}
	if s.first.IsZero() || now.Before(s.first) {
		s.first = now
	}
	if now.After(s.last) {
		s.last = now
	}
}

// startWatch connects cfg.Viewers viewers, round-robin over the targets
// and the auctions, at most cfg.ConnectRate a second; it returns at once.
func (e *Env) startWatch(ctx context.Context, cfg ViewerConfig, auctions []int64) *watch {
	w := &watch{cfg: cfg, targets: e.targets, auctions: auctions, logs: make([]ViewerLog, cfg.Viewers),
		ok: make([]bool, cfg.Viewers), failures: map[string]int{}, conns: map[int]*websocket.Conn{}}
	w.ctx, w.cancel = context.WithCancel(ctx)
	for i := range w.shards {
		w.shards[i].h = newHist(3)
	}
	w.connecting.Add(cfg.Viewers)
	go w.pace()
	return w
}

// pace starts viewer i at start + i/ConnectRate.
func (w *watch) pace() {
	start := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := range w.cfg.Viewers {
		at := start.Add(time.Duration(float64(i) * float64(time.Second) / w.cfg.ConnectRate))
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-w.ctx.Done():
			}
		}
		if w.ctx.Err() != nil {
			w.fail("not started: the run ended", nil, w.cfg.Viewers-i)
			w.connecting.Add(-(w.cfg.Viewers - i))
			return
		}
		go w.viewer(i)
	}
}

// where is viewer i's target and auction: every pair of the two gets
// viewers, whatever their counts.
func (w *watch) where(i int) (target int, auction int64) {
	t := i % len(w.targets)
	return t, w.auctions[(i/len(w.targets))%len(w.auctions)]
}

func (w *watch) viewer(i int) {
	t, id := w.where(i)
	l := &w.logs[i]
	l.Viewer, l.AuctionID, l.Target = i+1, id, t
	conn := w.connect(i, t, id)
	if conn != nil {
		w.ok[i] = true
		w.reading.Add(1)
	}
	w.connecting.Done()
	if conn == nil {
		return
	}
	defer w.reading.Done()
	w.read(i, l, conn)
}

// connect opens viewer i's WebSocket; nil when it failed (counted).
func (w *watch) connect(i, t int, id int64) *websocket.Conn {
	dialer := &websocket.Dialer{HandshakeTimeout: viewerHandshake, ReadBufferSize: 1024, WriteBufferSize: 256,
		NetDialContext: w.netDial(i, t)}
	url := "ws://" + w.targets[t].Addr + "/ws/auctions/" + strconv.FormatInt(id, 10)
	conn, resp, err := dialer.DialContext(w.ctx, url, nil)
	if err != nil {
		w.fail(connectFailure(w.ctx, resp, err), err, 1)
		return nil
	}
	w.connected.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping.Load() {
		_ = conn.Close()
	} else {
		w.conns[i] = conn
	}
	return conn
}

// netDial dials from viewer i's loopback source address when the target
// is on IPv4 loopback and PerSource asks for it.
func (w *watch) netDial(i, t int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return loopbackDial(w.cfg.PerSource, i, w.targets[t].Addr)
}

// loopbackDial dials from connection i's loopback source address (see
// sourceAddr) when target is on IPv4 loopback and perSource asks for it.
func loopbackDial(perSource, i int, target string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{}
	if src, ok := sourceAddr(perSource, i, target); ok {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	return d.DialContext
}

// sourceAddr is viewer i's source address: 127.0.0.1 for the first
// perSource viewers, 127.0.0.2 for the next, and so on (Linux answers on
// all of 127.0.0.0/8).
func sourceAddr(perSource, i int, target string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(target)
	if perSource <= 0 || err != nil || !ap.Addr().Is4() {
		return netip.Addr{}, false
	}
	base := netip.AddrFrom4([4]byte{127, 0, 0, 1}).As4()
	n := binary.BigEndian.Uint32(base[:]) + uint32(i/perSource)
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], n)
	a := netip.AddrFrom4(out)
	return a, a.IsLoopback()
}

// sources is how many source addresses n viewers use.
func sources(perSource, n int) int {
	if perSource <= 0 || n == 0 {
		return 1
	}
	return (n + perSource - 1) / perSource
}

// connectFailure is a connect error's class, for the report's tally.
func connectFailure(ctx context.Context, resp *http.Response, err error) string {
	var ne net.Error
	switch {
	case resp != nil:
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	case ctx.Err() != nil:
		return "stopped: the run ended"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "source address not available"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "too many open files (bidbench)"
	case errors.As(err, &ne) && ne.Timeout():
		return "handshake timeout"
	}
	return "connect error"
}

func (w *watch) fail(class string, err error, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures[class] += n
	if w.firstErr == "" && err != nil {
		w.firstErr = err.Error()
	}
}

// read takes viewer i's messages until its closed message, a drop, or the
// harness closing the connection.
func (w *watch) read(i int, l *ViewerLog, conn *websocket.Conn) {
	shard := &w.shards[i%lagShards]
	defer func() {
		w.mu.Lock()
		delete(w.conns, i)
		w.mu.Unlock()
		_ = conn.Close()
	}()
	for l.Final == nil {
		_, data, err := conn.ReadMessage()
		if err != nil {
			if !w.stopping.Load() {
				l.Dropped = dropReason(err)
			}
			return
		}
		now := time.Now()
		var m viewerMessage
		if err := json.Unmarshal(data, &m); err != nil {
			l.undecodable(err)
			continue
		}
		l.observe(m)
		w.delivered.Add(1)
		// The lag runs from the store's time of the state to its arrival:
		// one machine, one clock (loopback only).
		at, err := time.Parse(time.RFC3339Nano, m.UpdatedAt)
		stamped := m.UpdatedAt != "" && err == nil
		if !stamped {
			w.unstamped.Add(1)
		}
		shard.add(now, now.Sub(at), stamped)
	}
}

// dropReason is why a connection ended before its closed message.
func dropReason(err error) string {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return fmt.Sprintf("closed %d %s", ce.Code, ce.Text)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without a close frame"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "read timeout"
	}
	return "read error"
}

// awaitConnected waits until every viewer has connected or failed to.
func (w *watch) awaitConnected(ctx context.Context) error {
	done := make(chan struct{})
	go func() { w.connecting.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish gives the viewers up to grace to get their closed messages, then
// closes those still reading and waits for them.
func (w *watch) finish(grace time.Duration) {
	done := make(chan struct{})
	go func() { w.connecting.Wait(); w.reading.Wait(); close(done) }()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	hangUp(&w.stopping, w.cancel, &w.mu, w.conns)
	<-done
}

// hangUp stops a set of WebSocket clients: marks them stopping (a read
// error is then no drop), cancels their dials and closes each open
// connection, held in conns under mu.
func hangUp(stopping *atomic.Bool, cancel context.CancelFunc, mu *sync.Mutex, conns map[int]*websocket.Conn) {
	stopping.Store(true)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// connectedLogs are the logs of the viewers that connected (after finish).
func (w *watch) connectedLogs() []ViewerLog {
	out := make([]ViewerLog, 0, w.connected.Load())
	for i := range w.logs {
		if w.ok[i] {
			out = append(out, w.logs[i])
		}
	}
	return out
}

// ViewersResult is what the run's WebSocket viewers saw and cost.
type ViewersResult struct {
	Asked          int            `json:"asked"`
	Connected      int64          `json:"connected"`
	Failed         int            `json:"failed"`
	FailedBy       map[string]int `json:"failedBy,omitempty"`
	FirstError     string         `json:"firstError,omitempty"`
	ConnectSeconds float64        `json:"connectSeconds"`
	SourceAddrs    int            `json:"sourceAddresses"`
	Dropped        int            `json:"dropped"` // connected, then ended before the closed message
	DroppedBy      map[string]int `json:"droppedBy,omitempty"`
	Closed         int            `json:"gotClosed"` // got the closed message
	Delivered      int64          `json:"messages"`
	Unstamped      int64          `json:"messagesWithoutUpdatedAt"`
	// MessagesPerSec is Delivered over the span from the first message to
	// the last.
	MessagesPerSec float64 `json:"messagesPerSecond"`
	Span           float64 `json:"spanSeconds"`
	// Lag runs from each message's updatedAt (the store's time of the
	// state) to its arrival at bidbench.
	Lag Latency `json:"lag"`
	// NodeCPUPerMessageUs is the nodes' CPU over the load (bids, polls and
	// viewers together) per message delivered in that span.
	NodeCPUPerMessageUs float64 `json:"nodeCpuUsPerMessage,omitempty"`
	CPUMessages         int64   `json:"messagesInCpuSpan"`
	CPUMissing          string  `json:"cpuMissing,omitempty"`
	// Resident memory of the nodes, summed, before and after the viewers
	// connected.
	RSSBefore     float64 `json:"rssBytesBefore,omitempty"`
	RSSAfter      float64 `json:"rssBytesAfter,omitempty"`
	BytesPer1000  float64 `json:"bytesPer1000Viewers,omitempty"`
	MemoryMissing string  `json:"memoryMissing,omitempty"`
}

// result sums up the viewers (after finish).
func (w *watch) result() *ViewersResult {
	r := &w.measured
	r.Asked, r.Connected, r.Delivered, r.Unstamped = w.cfg.Viewers, w.connected.Load(), w.delivered.Load(), w.unstamped.Load()
	r.SourceAddrs = sources(w.cfg.PerSource, w.cfg.Viewers)
	w.mu.Lock()
	r.FailedBy, r.FirstError = maps.Clone(w.failures), w.firstErr
	w.mu.Unlock()
	for _, n := range r.FailedBy {
		r.Failed += n
	}
	r.DroppedBy = map[string]int{}
	for _, l := range w.connectedLogs() {
		switch {
		case l.Dropped != "":
			r.Dropped++
			r.DroppedBy[l.Dropped]++
		case l.Final != nil:
			r.Closed++
		}
	}
	lag := newHist(3)
	var first, last time.Time
	for i := range w.shards {
		s := &w.shards[i]
		lag.Merge(s.h)
		if !s.first.IsZero() && (first.IsZero() || s.first.Before(first)) {
			first = s.first
		}
		if s.last.After(last) {
			last = s.last
		}
	}
	r.Lag = latencyOf(lag)
	if span := last.Sub(first).Seconds(); span > 0 {
		r.Span, r.MessagesPerSec = span, float64(r.Delivered)/span
	}
	return r
}

// connectTime is how long the flash sale's viewers and notice listeners
// take to connect at their rate, plus a second.
func connectTime(c FlashSaleConfig) time.Duration {
	if c.Viewers+c.Inboxes == 0 {
		return 0
	}
	return time.Duration(float64(c.Viewers+c.Inboxes)/c.ViewerConnectRate*float64(time.Second)) + time.Second
}

// watchHot connects the flash sale's viewers to its hot auctions and
// waits for them, reading the nodes' resident memory before and after;
// nil without viewers.
func (e *Env) watchHot(ctx context.Context, res *Result, c FlashSaleConfig, hot []AuctionSpec) *watch {
	if c.Viewers == 0 {
		return nil
	}
	before, errBefore := e.cpu.residentBytes(ctx)
	e.notef("connecting %d viewers at %.0f/s", c.Viewers, c.ViewerConnectRate)
	start := time.Now()
	w := e.startWatch(ctx, ViewerConfig{Viewers: c.Viewers, ConnectRate: c.ViewerConnectRate, PerSource: c.ViewersPerSource}, ids(hot))
	if err := w.awaitConnected(ctx); err != nil {
		return w
	}
	m := &w.measured
	m.ConnectSeconds = time.Since(start).Seconds()
	after, errAfter := e.cpu.residentBytes(ctx)
	switch n := w.connected.Load(); {
	case errBefore != nil:
		m.MemoryMissing = errBefore.Error()
	case errAfter != nil:
		m.MemoryMissing = errAfter.Error()
	case n == 0:
		m.MemoryMissing = "no viewer connected"
	default:
		m.RSSBefore, m.RSSAfter = before, after
		m.BytesPer1000 = (after - before) / float64(n) * 1000
	}
	if n := w.cfg.Viewers - int(w.connected.Load()); n > 0 {
		res.note(fmt.Sprintf("%d of %d viewers could not connect", n, w.cfg.Viewers))
	}
	return w
}

// messages is how many messages the viewers have received so far (0
// without viewers).
func (w *watch) messages() int64 {
	if w == nil {
		return 0
	}
	return w.delivered.Load()
}

// chargeCPU charges the nodes' CPU over the load to the messages
// delivered in the same span.
func (w *watch) chargeCPU(c CPU, msgs int64) {
	if w == nil {
		return
	}
	m := &w.measured
	m.CPUMessages = msgs
	switch {
	case c.Server == nil:
		m.CPUMissing = c.ServerMissing
	case msgs == 0:
		m.CPUMissing = "no message in the span"
	default:
		m.NodeCPUPerMessageUs = c.Server.Seconds * 1e6 / float64(msgs)
	}
}

// ConnectSentence says how the viewers connected and ended.
func (v *ViewersResult) ConnectSentence() string {
	s := fmt.Sprintf("%d of %d connected in %.1f s from %d source address(es), %d failed", v.Connected, v.Asked,
		v.ConnectSeconds, v.SourceAddrs, v.Failed)
	if v.Failed > 0 {
		s += " (" + countsOf(v.FailedBy) + ")"
	}
	s += fmt.Sprintf("; %d got the closed message, %d dropped by the server", v.Closed, v.Dropped)
	if v.Dropped > 0 {
		s += " (" + countsOf(v.DroppedBy) + ")"
	}
	return s
}

// MessageSentence says what the viewers received and how late.
func (v *ViewersResult) MessageSentence() string {
	return fmt.Sprintf("%d messages, %.0f/s over %.1f s; lag from updatedAt (the store's time; bidbench's clock, same machine): "+
		"p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d messages (%d without updatedAt: snapshots)",
		v.Delivered, v.MessagesPerSec, v.Span, v.Lag.P50, v.Lag.P99, v.Lag.Max, v.Lag.Count, v.Unstamped)
}

// CostSentence says what the viewers cost the nodes.
func (v *ViewersResult) CostSentence() string {
	cpu := "node CPU per message missing (" + v.CPUMissing + ")"
	if v.CPUMissing == "" {
		cpu = fmt.Sprintf("node CPU %.1f µs per delivered message (all the nodes' CPU over the load, bids included, ÷ %d messages in it)",
			v.NodeCPUPerMessageUs, v.CPUMessages)
	}
	mem := "memory missing (" + v.MemoryMissing + ")"
	if v.MemoryMissing == "" {
		mem = fmt.Sprintf("memory %.2f MiB per 1,000 viewers (nodes' resident memory %.1f → %.1f MiB)",
			v.BytesPer1000/(1<<20), v.RSSBefore/(1<<20), v.RSSAfter/(1<<20))
	}
	return cpu + "; " + mem
}

// countsOf writes a tally as "key n, key n" in key order.
func countsOf(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
