package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/fasthttp/websocket"

	"bidgate"
	"bidgate/internal/auth"
)

// inboxGrace is how long listeners may still take, once every notice is
// stored, to receive theirs.
const inboxGrace = 10 * time.Second

// inboxReconnects is how often a listener reconnects (with ?after=) after
// a drop before it gives up.
const inboxReconnects = 5

// CheckInbox is the id of the live-notice audit.
const CheckInbox = "inbox"

// inboxes is a run's notice listeners: bidders connected to GET /ws/me as
// a bidder's app is, each keeping what it received.
type inboxes struct {
	targets   []Target
	tokens    *Tokens
	perSource int
	logs      []inboxLog
	ctx       context.Context
	cancel    context.CancelFunc
	stopping  atomic.Bool
	distinct  atomic.Int64 // notice ids received, each once per listener

	connecting, reading sync.WaitGroup

	mu       sync.Mutex
	conns    map[int]*websocket.Conn
	failures map[string]int
}

// inboxLog is one listener's: what it received, first delivery each.
type inboxLog struct {
	user     int64
	ok       bool                     // the first connect succeeded
	got      map[string]time.Duration // notice id -> lag of its first delivery
	dups     []string                 // ids delivered twice on one connection
	foreign  []string                 // notices of another user
	sessions int
	drops    []string
}

// startInboxes connects users' /ws/me, round-robin over the targets, at
// most rate a second, perSource per loopback source address; it returns
// once every listener has connected or failed to.
func (e *Env) startInboxes(ctx context.Context, users []int64, rate float64, perSource int) *inboxes {
	b := &inboxes{targets: e.targets, tokens: e.tokens, perSource: perSource,
		logs: make([]inboxLog, len(users)), conns: map[int]*websocket.Conn{}, failures: map[string]int{}}
	b.ctx, b.cancel = context.WithCancel(ctx)
	for i, u := range users {
		b.logs[i] = inboxLog{user: u, got: map[string]time.Duration{}}
	}
	b.connecting.Add(len(users))
	start := time.Now()
	for i := range users {
		if err := sleepUntil(b.ctx, start.Add(time.Duration(float64(i)*float64(time.Second)/rate))); err != nil {
			b.fail("not started: the run ended", len(users)-i)
			b.connecting.Add(-(len(users) - i))
			break
		}
		go b.listen(i)
	}
	b.connecting.Wait()
	return b
}

func (b *inboxes) fail(class string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures[class] += n
}

// connect opens listener i's /ws/me, after the notice after when it is
// not ""; nil when that failed (counted).
func (b *inboxes) connect(i int, after string) *websocket.Conn {
	l := &b.logs[i]
	t := i % len(b.targets)
	header, err := b.tokens.Header(l.user, auth.ScopeBid)
	if err != nil {
		b.fail("no token: "+err.Error(), 1)
		return nil
	}
	dialer := &websocket.Dialer{HandshakeTimeout: viewerHandshake, ReadBufferSize: 1024, WriteBufferSize: 256,
		NetDialContext: loopbackDial(b.perSource, i, b.targets[t].Addr)}
	u := "ws://" + b.targets[t].Addr + "/ws/me"
	if after != "" {
		u += "?after=" + url.QueryEscape(after)
	}
	conn, resp, err := dialer.DialContext(b.ctx, u, http.Header{"Authorization": {string(header)}})
	if err != nil {
		b.fail(connectFailure(b.ctx, resp, err), 1)
		return nil
	}
	l.sessions++
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopping.Load() {
		_ = conn.Close()
		return nil
	}
	b.conns[i] = conn
	return conn
}

// listen runs listener i: connect, read until dropped, reconnect with
// ?after= the last notice, until the harness stops it.
func (b *inboxes) listen(i int) {
	l := &b.logs[i]
	conn := b.connect(i, "")
	if conn != nil {
		l.ok = true
		b.reading.Add(1)
	}
	b.connecting.Done()
	if conn == nil {
		return
	}
	defer b.reading.Done()
	last := ""
	for {
		err := b.read(l, conn, &last)
		b.mu.Lock()
		delete(b.conns, i)
		b.mu.Unlock()
		_ = conn.Close()
		if b.stopping.Load() {
			return
		}
		l.drops = append(l.drops, dropReason(err))
		if len(l.drops) > inboxReconnects {
			return
		}
		if conn = b.connect(i, last); conn == nil {
			return
		}
	}
}

// read takes one connection's notices until it fails; last follows the
// newest notice received.
func (b *inboxes) read(l *inboxLog, conn *websocket.Conn, last *string) error {
	seen := map[string]bool{}
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		now := time.Now()
		var f struct {
			Type   string         `json:"type"`
			Notice bidgate.Notice `json:"notice"`
		}
		if err := json.Unmarshal(data, &f); err != nil || f.Type != "notice" {
			l.foreign = append(l.foreign, fmt.Sprintf("undecodable frame %.80q", data))
			continue
		}
		n := f.Notice
		switch {
		case n.UserID != l.user:
			l.foreign = append(l.foreign, n.ID)
			continue
		case seen[n.ID]:
			l.dups = append(l.dups, n.ID)
			continue
		}
		seen[n.ID] = true
		*last = n.ID
		if _, ok := l.got[n.ID]; !ok {
			// One machine, one clock: from the store's time of the cause.
			l.got[n.ID] = now.Sub(n.At)
			b.distinct.Add(1)
		}
	}
}

// finish waits until the listeners hold want notices between them, or
// grace, then closes them all.
func (b *inboxes) finish(want int, grace time.Duration) {
	deadline := time.Now().Add(grace)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for b.distinct.Load() < int64(want) && time.Now().Before(deadline) {
		<-tick.C
	}
	hangUp(&b.stopping, b.cancel, &b.mu, b.conns)
	b.reading.Wait()
}

// expected is how many of stored are for the connected listeners.
func (b *inboxes) expected(stored []NoticeRow) int {
	users := map[int64]bool{}
	for _, l := range b.logs {
		if l.ok {
			users[l.user] = true
		}
	}
	n := 0
	for _, x := range stored {
		if users[x.UserID] {
			n++
		}
	}
	return n
}

// InboxesResult is what the notice listeners saw.
type InboxesResult struct {
	Listeners  int            `json:"listeners"`
	Connected  int            `json:"connected"`
	Failures   map[string]int `json:"failures,omitempty"`
	Expected   int            `json:"expected"`  // notices stored for the connected listeners
	Delivered  int            `json:"delivered"` // of them, received live
	Reconnects int            `json:"reconnects"`
	// Lag from a notice's cause (its store's time) to its arrival, by type,
	// of the notices caused from the measured load's start on: WarmupLeftOut
	// were caused in the warm-up.
	Lag           map[string]Latency `json:"lagByType"`
	WarmupLeftOut int                `json:"warmupLeftOut,omitempty"`
	All           Latency            `json:"lag"`
}

// Sentence is the result in one line.
func (r *InboxesResult) Sentence() string {
	s := fmt.Sprintf("%d of %d bidders connected to /ws/me; %d of the %d notices stored for them delivered live, %d reconnects; lag p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		r.Connected, r.Listeners, r.Delivered, r.Expected, r.Reconnects, r.All.P50, r.All.P99, r.All.Max)
	if r.WarmupLeftOut > 0 {
		s += fmt.Sprintf(" (%d caused in the warm-up left out of the lag)", r.WarmupLeftOut)
	}
	return s
}

// result tallies the listeners against the stored notices, and checks
// that each connected listener got every one of its notices live, once
// per connection, and nobody else's; the lag counts the notices caused
// from since on.
func (b *inboxes) result(stored []NoticeRow, since time.Time) (*InboxesResult, Check) {
	r := &InboxesResult{Listeners: len(b.logs), Failures: b.failures, Lag: map[string]Latency{}}
	c := Check{ID: CheckInbox, Invariant: 3, Name: "every notice stored for a bidder connected to /ws/me reached them live, once per connection, and no one else's"}
	byUser := map[int64]*inboxLog{}
	for i := range b.logs {
		if l := &b.logs[i]; l.ok {
			byUser[l.user] = l
			r.Connected++
			r.Reconnects += l.sessions - 1
			for _, id := range l.dups {
				c.fail("user %d got notice %s twice on one connection", l.user, id)
			}
			for _, id := range l.foreign {
				c.fail("user %d got %s, not theirs", l.user, id)
			}
		}
	}
	all, byType := newHist(3), map[string]*hdrhistogram.Histogram{}
	for _, n := range stored {
		l := byUser[n.UserID]
		if l == nil {
			continue
		}
		r.Expected++
		c.Checked++
		lag, ok := l.got[n.ID]
		if !ok {
			c.fail("notice %s (%s) to user %d was stored but never delivered on /ws/me (%d connections, drops: %v)", n.ID, n.Type, l.user, l.sessions, l.drops)
			continue
		}
		r.Delivered++
		if n.At.Before(since) {
			r.WarmupLeftOut++
			continue
		}
		if byType[n.Type] == nil {
			byType[n.Type] = newHist(3)
		}
		recordLatency(byType[n.Type], lag)
		recordLatency(all, lag)
	}
	for t, h := range byType {
		r.Lag[t] = latencyOf(h)
	}
	r.All = latencyOf(all)
	return r, c.done()
}

// listenerIDs are the first n of the run's bidders: the load spreads its
// bids over all of them alike.
func (e *Env) listenerIDs(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = e.bidders.base + int64(i) + 1
	}
	return ids
}

// lagLines are the lag of each notice type, for the text report.
func (r *InboxesResult) lagLines() []string {
	var lines []string
	for _, t := range slices.Sorted(maps.Keys(r.Lag)) {
		l := r.Lag[t]
		lines = append(lines, fmt.Sprintf("%s: %d delivered, lag p50 %.0f ms, p99 %.0f ms, max %.0f ms", t, l.Count, l.P50, l.P99, l.Max))
	}
	return lines
}
