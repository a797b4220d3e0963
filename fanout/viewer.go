package fanout

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

const (
	// maxClientMessage bounds what a viewer may send: the protocol has
	// nothing for clients to say, so anything larger closes the connection.
	maxClientMessage = 512
	// closeWait is how long a closing server waits for the client to answer
	// its close frame before it drops the connection.
	closeWait = time.Second
)

// Close reasons a viewer sees in the close frame.
const (
	reasonClosed   = "auction closed"
	reasonSlow     = "too slow"
	reasonShutdown = "server shutting down"
)

// viewer is one WebSocket connection. Its queue holds a single message: the
// newest state it has not written yet. The room replaces that message
// instead of waiting, so a viewer that does not keep up only skips states
// (counted as overflows) and, if it stays behind for SlowTimeout, is closed.
type viewer struct {
	hub  *Hub
	conn *websocket.Conn

	mu          sync.Mutex
	pending     *message  // queued, not yet written
	last        rank      // the newest state queued or written
	behindSince time.Time // first overflow since the writer last emptied the queue
	slowMarked  bool

	// wake (capacity 1) tells the writer to look at pending and events.
	// One channel instead of a select over several keeps the writer cheap
	// when 10,000 of them wake on every flush.
	wake   chan struct{}
	events atomic.Uint32
	ping   *time.Timer

	readerDone chan struct{}

	// deadlineMu orders the pong handler's deadline extensions with
	// shutdown's final deadline, so that a late pong cannot revive a reader
	// that is being stopped.
	deadlineMu sync.Mutex
	stopping   bool
}

// Events for the writer, besides a pending message.
const (
	evPing       uint32 = 1 << iota // time to ping
	evSlow                          // the viewer stayed behind for SlowTimeout
	evReaderDone                    // the client left, broke the protocol, or stopped answering pings
	evStop                          // the hub is stopping
)

func newViewer(h *Hub, conn *websocket.Conn, sent rank) *viewer {
	return &viewer{hub: h, conn: conn, last: sent, wake: make(chan struct{}, 1), readerDone: make(chan struct{})}
}

// signal hands the writer an event without blocking.
func (v *viewer) signal(ev uint32) {
	v.events.Or(ev)
	v.poke()
}

func (v *viewer) poke() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// offer queues m unless the viewer already has it or something newer. It
// never blocks: it runs inside a room's broadcast.
func (v *viewer) offer(m *message) {
	v.mu.Lock()
	if !m.rank.newer(v.last) {
		v.mu.Unlock()
		return
	}
	v.last = m.rank
	if v.pending != nil {
		v.hub.metrics.overflows.Inc()
		now := time.Now()
		if v.behindSince.IsZero() {
			v.behindSince = now
		} else if !v.slowMarked && now.Sub(v.behindSince) >= v.hub.cfg.SlowTimeout {
			v.slowMarked = true
			v.events.Or(evSlow)
		}
	}
	v.pending = m
	v.mu.Unlock()
	v.poke()
}

func (v *viewer) take() *message {
	v.mu.Lock()
	defer v.mu.Unlock()
	m := v.pending
	v.pending = nil
	return m
}

// caughtUp ends a period of overflowing once the writer finds the queue
// empty after a write: only a viewer that stays behind is too slow.
func (v *viewer) caughtUp() {
	v.mu.Lock()
	if v.pending == nil {
		v.behindSince = time.Time{}
	}
	v.mu.Unlock()
}

// run is the connection's only writer of data frames: the first message
// (the snapshot), then queued messages and pings, until the auction closes,
// the viewer leaves or falls behind, or the hub stops. It returns once the
// reader has ended too.
func (v *viewer) run(first *message) {
	defer v.shutdown()
	if v.write(first) != nil {
		return
	}
	if first.rank.closed {
		v.close(websocket.CloseNormalClosure, reasonClosed)
		return
	}
	v.ping = time.AfterFunc(v.hub.cfg.PingInterval, func() { v.signal(evPing) })
	defer v.ping.Stop()
	for range v.wake {
		ev := v.events.Swap(0)
		switch {
		case ev&evStop != 0:
			v.close(websocket.CloseGoingAway, reasonShutdown)
			return
		case ev&evReaderDone != 0:
			return
		case ev&evSlow != 0:
			v.closeSlow()
			return
		}
		if m := v.take(); m != nil {
			if v.write(m) != nil {
				return
			}
			if m.rank.closed {
				v.close(websocket.CloseNormalClosure, reasonClosed)
				return
			}
			v.caughtUp()
		}
		if ev&evPing != 0 {
			if v.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(v.hub.cfg.WriteTimeout)) != nil {
				return
			}
			v.ping.Reset(v.hub.cfg.PingInterval)
		}
	}
}

func (v *viewer) write(m *message) error {
	_ = v.conn.SetWriteDeadline(time.Now().Add(v.hub.cfg.WriteTimeout))
	if err := v.conn.WritePreparedMessage(m.frame); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			v.hub.metrics.slowClosed.Inc()
			v.hub.log.Debug("fanout: dropping viewer: write timed out", "remote", v.conn.RemoteAddr().String())
		}
		return err
	}
	v.hub.metrics.messagesSent.Inc()
	if !m.updatedAt.IsZero() {
		v.hub.metrics.lag.Observe(max(time.Since(m.updatedAt).Seconds(), 0))
	}
	return nil
}

func (v *viewer) closeSlow() {
	v.hub.metrics.slowClosed.Inc()
	v.hub.log.Debug("fanout: closing slow viewer", "remote", v.conn.RemoteAddr().String(),
		"behind_for", v.hub.cfg.SlowTimeout.String())
	v.close(websocket.ClosePolicyViolation, reasonSlow)
}

// close sends a close frame and gives the client closeWait to answer it,
// which completes the closing handshake (the reader ends on the answer).
func (v *viewer) close(code int, reason string) {
	msg := websocket.FormatCloseMessage(code, reason)
	if v.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(v.hub.cfg.WriteTimeout)) != nil {
		return
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-v.readerDone:
	case <-t.C:
	}
}

// shutdown stops the reader and waits for it. The socket itself is closed by
// the caller once the viewer has left its room.
func (v *viewer) shutdown() {
	v.deadlineMu.Lock()
	v.stopping = true
	_ = v.conn.SetReadDeadline(time.Now())
	v.deadlineMu.Unlock()
	<-v.readerDone
}

var errStoppingReader = errors.New("fanout: viewer is shutting down")

// extendDeadline keeps the reader alive for another d, unless shutdown has
// begun.
func (v *viewer) extendDeadline(d time.Duration) error {
	v.deadlineMu.Lock()
	defer v.deadlineMu.Unlock()
	if v.stopping {
		return errStoppingReader
	}
	return v.conn.SetReadDeadline(time.Now().Add(d))
}

// read handles control frames (pongs, pings, close) and discards anything
// else; a viewer silent for two ping intervals is considered gone.
func (v *viewer) read() {
	defer v.signal(evReaderDone)
	defer close(v.readerDone)
	c := v.conn
	alive := 2 * v.hub.cfg.PingInterval
	c.SetReadLimit(maxClientMessage)
	if v.extendDeadline(alive) != nil {
		return
	}
	c.SetPongHandler(func(string) error { return v.extendDeadline(alive) })
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}
