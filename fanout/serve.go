package fanout

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"bidgate"
)

const (
	// handshakeGrace is how long a viewer's slot waits for fasthttp to hand
	// over the upgraded connection (it does not if writing the 101 failed).
	handshakeGrace = 10 * time.Second
	// retryFullSeconds is the Retry-After of a node that has all the viewers
	// it takes: long enough for a reconnect storm to spread out.
	retryFullSeconds = 5
)

// ServeWS is the fasthttp handler body for GET /ws/auctions/{id}. Every
// refusal is decided before the upgrade and answered with
// application/problem+json: 403 origin_not_allowed, 503 too_many_viewers
// (with Retry-After), 404 auction_not_found, 503 unavailable. A request that
// is not a WebSocket handshake gets 404 or 426 upgrade_required.
func (h *Hub) ServeWS(ctx *fasthttp.RequestCtx, auctionID int64) {
	if h.cfg.CheckOrigin != nil && !h.cfg.CheckOrigin(string(ctx.Request.Header.Peek("Origin"))) {
		writeProblem(ctx, fasthttp.StatusForbidden, "origin_not_allowed", "this origin may not watch auctions", 0)
		return
	}
	// Not derived from ctx: fasthttp reuses a RequestCtx once the handler
	// returns, while a deadline's timer may still be reading it.
	jctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	if !websocket.FastHTTPIsWebSocketUpgrade(ctx) {
		if _, err := h.snap.Auction(jctx, auctionID); err != nil {
			h.refuseSnapshot(ctx, auctionID, err)
			return
		}
		ctx.Response.Header.Set("Upgrade", "websocket")
		writeProblem(ctx, fasthttp.StatusUpgradeRequired, "upgrade_required", "connect with a WebSocket client", 0)
		return
	}

	addr := ctx.RemoteIP().String()
	switch err := h.reserve(addr); {
	case errors.Is(err, errAddrFull):
		writeProblem(ctx, fasthttp.StatusTooManyRequests, "rate_limited",
			"this address holds as many viewers as it may; close some first", retryFullSeconds)
		return
	case errors.Is(err, errFull):
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, "too_many_viewers",
			"this node has as many viewers as it takes; retry later", retryFullSeconds)
		return
	case err != nil:
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, "unavailable", "this node is shutting down; retry later", 0)
		return
	}
	// Subscribe first, then read the snapshot: a state made after the read
	// is published after it too, so it reaches the room.
	r, err := h.join(jctx, auctionID)
	if err != nil {
		h.unreserve(addr)
		h.log.Warn("fanout: refuse viewer", "auction", auctionID, "err", err)
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, "unavailable", "live updates are unavailable; retry later", 0)
		return
	}
	a, err := h.snap.Auction(jctx, auctionID)
	if err != nil {
		h.leave(r)
		h.unreserve(addr)
		h.refuseSnapshot(ctx, auctionID, err)
		return
	}
	snap := bidgate.NewStateUpdate(a)
	first, err := encode(typeSnapshot, snap, 0)
	if err != nil {
		h.leave(r)
		h.unreserve(addr)
		h.refuseSnapshot(ctx, auctionID, err)
		return
	}
	l := h.newLease(r, addr)
	if err := h.upgrader.Upgrade(ctx, func(conn *websocket.Conn) { h.serveConn(l, conn, first, snap) }); err != nil {
		l.release() // the upgrader has answered the bad handshake
	}
}

func (h *Hub) refuseSnapshot(ctx *fasthttp.RequestCtx, auctionID int64, err error) {
	if errors.Is(err, bidgate.ErrAuctionNotFound) {
		writeProblem(ctx, fasthttp.StatusNotFound, "auction_not_found", "no auction with this id", 0)
		return
	}
	h.log.Warn("fanout: read auction snapshot", "auction", auctionID, "err", err)
	writeProblem(ctx, fasthttp.StatusServiceUnavailable, "unavailable", "the auction cannot be read now; retry later", 0)
}

// serveConn runs on fasthttp's hijack goroutine for the connection's whole
// life; when it returns fasthttp closes the socket.
func (h *Hub) serveConn(l *lease, conn *websocket.Conn, first *message, snap bidgate.StateUpdate) {
	if !l.claim() {
		_ = conn.Close()
		return
	}
	h.metrics.viewers.Inc()
	v := newViewer(h, conn, first.rank)
	if !first.rank.closed {
		l.room.register(v, snap)
		// Stop signals the viewers registered when it begins; one that
		// registers later sees it here.
		if h.isStopping() {
			v.signal(evStop)
		}
	}
	go v.read()
	v.run(first)
	l.room.unregister(v)
	h.metrics.viewers.Dec()
	// Leave before the socket closes: a client that saw the close knows the
	// node has let go of it.
	l.release()
	_ = conn.Close()
}

// lease is a viewer's hold on a slot and on its room's subscription, taken
// before the upgrade and given back exactly once.
type lease struct {
	hub    *Hub
	room   *room
	addr   string // the client address its slot counts against
	once   sync.Once
	expiry *time.Timer
}

func (h *Hub) newLease(r *room, addr string) *lease {
	l := &lease{hub: h, room: r, addr: addr}
	l.expiry = time.AfterFunc(handshakeGrace, l.free)
	return l
}

// claim reports whether the lease is still held, and keeps it from
// expiring.
func (l *lease) claim() bool { return l.expiry.Stop() }

func (l *lease) release() {
	l.expiry.Stop()
	l.free()
}

func (l *lease) free() {
	l.once.Do(func() {
		l.hub.leave(l.room)
		l.hub.unreserve(l.addr)
	})
}
