package fanout

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"golang.org/x/time/rate"
)

const (
	// closeWait is how long a closing server waits for the client to answer
	// its close frame before it drops the connection.
	closeWait = time.Second
	// A viewer may send control frames (pings, pongs) at controlRate per
	// second, in bursts of controlBurst: enough to answer the server's
	// pings and keep its own keep-alive, far too few to make a node spend
	// its CPU answering pings. Beyond them it is closed with 1008.
	controlRate  = 2
	controlBurst = 16
	// maxDrain bounds what is read and discarded from a viewer closed for
	// breaking the protocol while its close frame goes out.
	maxDrain = 1 << 20
)

// Close reasons a viewer sees in the close frame.
const (
	reasonClosed       = "auction closed"
	reasonSlow         = "too slow"
	reasonShutdown     = "server shutting down"
	reasonReceiveOnly  = "viewers are receive-only"
	reasonControlFlood = "too many control frames"
)

// Why a viewer broke the protocol: the reason label of
// bidgate_fanout_viewer_violations_total.
const (
	violationDataFrame    = "data_frame"    // it sent a text or binary message
	violationControlFlood = "control_flood" // it sent control frames beyond the rate
)

// errControlFlood ends the reader of a viewer past its control frame rate.
var errControlFlood = errors.New("fanout: viewer sent too many control frames")

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
	// violation is the close reason of a viewer that broke the protocol;
	// set by the reader before it signals evViolation.
	violation atomic.Pointer[string]

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
	evViolation                     // the client sent what a viewer may not: close it with 1008
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
		case ev&evViolation != 0:
			v.closeViolation(*v.violation.Load())
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

// closeViolation closes a viewer that broke the protocol (its reader has
// ended) with 1008. Closing a socket with unread bytes in it makes the
// kernel reset the connection and drop what was not sent yet, the close
// frame included, so what the client still sends is read and discarded
// for up to closeWait (and maxDrain bytes) or until it closes.
func (v *viewer) closeViolation(reason string) {
	<-v.readerDone
	msg := websocket.FormatCloseMessage(websocket.ClosePolicyViolation, reason)
	if v.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(v.hub.cfg.WriteTimeout)) != nil {
		return
	}
	nc := v.conn.NetConn()
	if nc.SetReadDeadline(time.Now().Add(closeWait)) != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, nc, maxDrain)
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

// read handles control frames (pongs, pings, close) until the viewer
// leaves, breaks the protocol or goes silent for two ping intervals.
// Viewers are receive-only: the protocol has nothing for them to say, so
// the first text or binary frame closes the connection with 1008 (its
// payload is never read), and so do control frames past controlRate: a
// client can no longer make the node read and answer frames as fast as it
// sends them.
func (v *viewer) read() {
	defer v.signal(evReaderDone)
	defer close(v.readerDone)
	c := v.conn
	alive := 2 * v.hub.cfg.PingInterval
	if v.extendDeadline(alive) != nil {
		return
	}
	control := rate.NewLimiter(controlRate, controlBurst)
	c.SetPongHandler(func(string) error {
		if !control.Allow() {
			return errControlFlood
		}
		return v.extendDeadline(alive)
	})
	c.SetPingHandler(func(data string) error {
		if !control.Allow() {
			return errControlFlood
		}
		// As the default handler: a pong that cannot be written is the
		// writer's problem, not the reader's.
		err := c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(v.hub.cfg.WriteTimeout))
		var ne net.Error
		if errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ne) {
			return nil
		}
		return err
	})
	_, _, err := c.NextReader() // returns at the first data frame
	switch {
	case err == nil:
		v.violate(violationDataFrame, reasonReceiveOnly)
	case errors.Is(err, errControlFlood):
		v.violate(violationControlFlood, reasonControlFlood)
	}
}

// violate records why the viewer is closed and tells the writer.
func (v *viewer) violate(kind, reason string) {
	v.hub.metrics.violations.WithLabelValues(kind).Inc()
	v.hub.log.Debug("fanout: closing viewer that broke the protocol", "remote", v.conn.RemoteAddr().String(), "violation", kind)
	v.violation.Store(&reason)
	v.signal(evViolation)
}
