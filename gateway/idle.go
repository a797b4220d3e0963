package gateway

import (
	"container/list"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// idleReleaseShare is the share of MaxConns past which idle keep-alive
// connections are released, oldest idle first: the slots they hold go to
// clients with a request to make before the cap answers anyone 503.
const idleReleaseShare = 0.9

// idleReleaser is a fasthttp ConnState hook that keeps a server's
// connections under its cap by releasing idle keep-alive ones first.
// fasthttp counts an idle connection against Concurrency (MaxConns) until
// IdleTimeout; without this, clients that open connections and leave them
// idle fill the cap and every new client gets 503.
//
// A release sets the connection's read deadline to now, which ends
// fasthttp's wait for the next request the way IdleTimeout would: the
// connection is closed without an answer, and a request whose first byte
// has already arrived is served, since fasthttp sets its own read deadline
// once it turns the connection active (which it tells this hook, under the
// same lock, after any release).
type idleReleaser struct {
	threshold int // release while more connections than this are open
	released  prometheus.Counter

	mu      sync.Mutex
	open    int
	pending int        // released, not yet closed
	idle    *list.List // of net.Conn, the longest idle first
	conns   map[net.Conn]*trackedConn
}

type trackedConn struct {
	idle     *list.Element // in idleReleaser.idle while the connection waits for a request
	released bool
}

func newIdleReleaser(maxConns int, released prometheus.Counter) *idleReleaser {
	return &idleReleaser{threshold: int(float64(maxConns) * idleReleaseShare), released: released,
		idle: list.New(), conns: make(map[net.Conn]*trackedConn)}
}

// connState follows a connection through fasthttp's states: new (counted,
// and the moment to release if the cap is near), active (serving a
// request), idle (waiting for the next one), closed or hijacked (a
// WebSocket: no longer the server's).
func (r *idleReleaser) connState(c net.Conn, state fasthttp.ConnState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.conns[c]
	switch state {
	case fasthttp.StateNew:
		if t == nil {
			r.conns[c] = &trackedConn{}
			r.open++
		}
		r.release()
	case fasthttp.StateActive:
		if t == nil {
			return
		}
		r.notIdle(t)
		if t.released { // a request came first: fasthttp has reset the deadline
			t.released = false
			r.pending--
		}
	case fasthttp.StateIdle:
		if t != nil && t.idle == nil && !t.released {
			t.idle = r.idle.PushBack(c)
		}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		if t == nil {
			return
		}
		r.notIdle(t)
		if t.released {
			r.pending--
		}
		delete(r.conns, c)
		r.open--
	}
}

func (r *idleReleaser) notIdle(t *trackedConn) {
	if t.idle != nil {
		r.idle.Remove(t.idle)
		t.idle = nil
	}
}

// release ends the wait of the longest idle connections while more than
// threshold are open and not already released.
func (r *idleReleaser) release() {
	for r.open-r.pending > r.threshold && r.idle.Len() > 0 {
		c := r.idle.Remove(r.idle.Front()).(net.Conn)
		t := r.conns[c]
		t.idle, t.released = nil, true
		r.pending++
		r.released.Inc()
		_ = c.SetReadDeadline(time.Now())
	}
}
