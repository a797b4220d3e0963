package fanout

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"bidgate"
)

// mailbox is one /ws/me connection: a bounded queue of the notices
// published for its user, written in order by serve.
type mailbox struct {
	inbox *Inbox
	user  *userBox
	addr  string
	// q holds published notices (JSON); a nil entry asks serve to read the
	// list again (the subscription was lost and came back).
	q        chan []byte
	done     chan struct{}
	ending   sync.Once
	code     int
	reason   string
	released sync.Once
	// last is the id of the newest notice written (or the after the client
	// gave), the anchor of a read-back. Only serve touches it after the
	// upgrade.
	last string
}

func newMailbox(b *Inbox, u *userBox, addr string) *mailbox {
	return &mailbox{inbox: b, user: u, addr: addr, q: make(chan []byte, b.cfg.Queue), done: make(chan struct{})}
}

// offer queues a notice without waiting: a connection too slow to keep its
// queue from filling is closed, and reads back what it missed on its next
// connect. Called with the inbox's mu held.
func (m *mailbox) offer(notice []byte) {
	select {
	case m.q <- notice:
	default:
		m.inbox.metrics.dropped.Inc()
		m.end(websocket.CloseTryAgainLater, "too slow: reconnect with ?after= the last notice you have")
	}
}

// end asks serve to close the connection with code.
func (m *mailbox) end(code int, reason string) {
	m.ending.Do(func() {
		m.code, m.reason = code, reason
		close(m.done)
	})
}

// maxSeen bounds the ids a connection remembers to skip duplicates.
const maxSeen = 4 * replayLimit

// noticeFrame is a /ws/me message: {"type":"notice","notice":{...}}.
type noticeFrame struct {
	Type   string          `json:"type"`
	Notice json.RawMessage `json:"notice"`
}

// serve runs on fasthttp's hijack goroutine for the connection's life.
func (m *mailbox) serve(conn *websocket.Conn, replay []bidgate.Notice) {
	b := m.inbox
	defer b.release(m)
	// The reader must be done with conn before this returns: fasthttp
	// reuses the hijacked connection's memory then. Closing conn ends its
	// read at once.
	readDone := make(chan struct{})
	defer func() {
		_ = conn.Close()
		<-readDone
	}()
	b.metrics.connected.Inc()
	defer b.metrics.connected.Dec()
	go func() {
		defer close(readDone)
		m.read(conn)
	}()
	seen := map[string]bool{}
	write := func(raw []byte) bool {
		var head struct {
			ID string    `json:"id"`
			At time.Time `json:"at"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.ID == "" {
			b.cfg.Log.Warn("inbox: skip a malformed notice", "err", err)
			return true
		}
		if seen[head.ID] {
			return true // replayed, or read back, already
		}
		if len(seen) >= maxSeen {
			clear(seen) // duplicates come from a recent overlap only
		}
		seen[head.ID] = true
		frame, err := json.Marshal(noticeFrame{Type: "notice", Notice: raw})
		if err != nil {
			return true
		}
		_ = conn.SetWriteDeadline(time.Now().Add(b.cfg.WriteTimeout))
		if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
			return false
		}
		m.last = head.ID
		b.metrics.delivered.Inc()
		b.metrics.lag.Observe(time.Since(head.At).Seconds())
		return true
	}
	writeAll := func(ns []bidgate.Notice) bool {
		for _, n := range ns {
			raw, err := json.Marshal(n)
			if err != nil || !write(raw) {
				return false
			}
		}
		return true
	}
	if !writeAll(replay) {
		return
	}
	ping := time.NewTicker(b.cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case raw := <-m.q:
			ok := true
			if raw == nil {
				ok = m.readBack(writeAll)
			} else {
				ok = write(raw)
			}
			if !ok {
				return
			}
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(b.cfg.WriteTimeout)) != nil {
				return
			}
		case <-m.done:
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(m.code, m.reason),
				time.Now().Add(b.cfg.WriteTimeout))
			return
		}
	}
}

// readBack writes what was stored after the last notice written, after a
// lost subscription; without an anchor there is nothing to read from.
func (m *mailbox) readBack(writeAll func([]bidgate.Notice) bool) bool {
	if m.last == "" {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	items, err := m.inbox.missedSince(ctx, m.user.id, m.last)
	if err != nil {
		m.inbox.cfg.Log.Warn("inbox: read back missed notices", "err", err)
		return true
	}
	return writeAll(items)
}

// read keeps the connection's control frames flowing and ends it when the
// client closes it, goes silent for two ping intervals, or sends data (a
// /ws/me client only listens).
func (m *mailbox) read(conn *websocket.Conn) {
	alive := 2 * m.inbox.cfg.PingInterval
	_ = conn.SetReadDeadline(time.Now().Add(alive))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(alive)) })
	_, _, err := conn.NextReader()
	if err == nil {
		m.end(websocket.ClosePolicyViolation, "a /ws/me client only listens")
		return
	}
	m.end(websocket.CloseNormalClosure, "")
}

type inboxMetrics struct {
	connected          prometheus.Gauge
	delivered, dropped prometheus.Counter
	lag                prometheus.Histogram
}

func newInboxMetrics(reg prometheus.Registerer) *inboxMetrics {
	f := promauto.With(reg)
	return &inboxMetrics{
		connected: f.NewGauge(prometheus.GaugeOpts{Name: "bidgate_notice_connections", Help: "Users' /ws/me connections to this node."}),
		delivered: f.NewCounter(prometheus.CounterOpts{Name: "bidgate_notices_delivered_total", Help: "Notices written to /ws/me connections (replays included)."}),
		dropped: f.NewCounter(prometheus.CounterOpts{Name: "bidgate_notice_connections_dropped_total",
			Help: "/ws/me connections closed because they fell behind (their queue filled)."}),
		lag: f.NewHistogram(prometheus.HistogramOpts{Name: "bidgate_notice_delivery_lag_seconds",
			Help:    "From a notice's cause (its store's time) to its write on a /ws/me connection.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
}
