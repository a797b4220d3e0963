package fanout

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/persist/redisstore"
)

// NoticeReader gives a user's stored notices; the shard's Notifications
// method fits. An anchor notice that is not the user's is an error wrapping
// bidgate.ErrNoticeNotFound.
type NoticeReader interface {
	Notifications(ctx context.Context, q bidgate.NotificationsQuery) (bidgate.NotificationsPage, error)
}

// InboxConfig tunes an Inbox. Zero values take DefaultInboxConfig's.
type InboxConfig struct {
	MaxConns     int // per node; beyond it a connect is answered 503
	MaxPerUser   int // connections of one user on a node; beyond it 429
	MaxPerAddr   int // connections of one client address; beyond it 429
	Queue        int // notices waiting for a slow connection before it is dropped
	PingInterval time.Duration
	WriteTimeout time.Duration
	// CheckOrigin says whether a browser's Origin may connect; nil allows
	// every origin.
	CheckOrigin func(origin string) bool
	Log         *slog.Logger
}

// DefaultInboxConfig is the one statement of the inbox's defaults.
func DefaultInboxConfig() InboxConfig {
	return InboxConfig{MaxConns: 20000, MaxPerUser: 5, MaxPerAddr: 256, Queue: 64,
		PingInterval: 20 * time.Second, WriteTimeout: 5 * time.Second, Log: slog.Default()}
}

func (c InboxConfig) withDefaults() InboxConfig {
	d := DefaultInboxConfig()
	c.MaxConns = cmp.Or(c.MaxConns, d.MaxConns)
	c.MaxPerUser = cmp.Or(c.MaxPerUser, d.MaxPerUser)
	c.MaxPerAddr = cmp.Or(c.MaxPerAddr, d.MaxPerAddr)
	c.Queue = cmp.Or(c.Queue, d.Queue)
	c.PingInterval = cmp.Or(c.PingInterval, d.PingInterval)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, d.WriteTimeout)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Subprotocol is the WebSocket subprotocol a browser names, followed by its
// token, to authenticate GET /ws/me (a browser cannot set Authorization on
// a WebSocket, and a token never goes in a URL): Sec-WebSocket-Protocol:
// bidgate.bearer, <token>. The server answers with this one alone.
const Subprotocol = "bidgate.bearer"

// replayLimit is how many missed notices a connection gets on connecting
// with ?after=; past them the client pages GET /me/notifications.
const replayLimit = 100

// Inbox delivers users' notices live over WebSocket (GET /ws/me): one
// Redis sharded subscription per user with connections on this node, each
// notice the notifier publishes written to every one of that user's
// connections here. A connection whose queue is full is dropped (the
// client reconnects with ?after= and misses nothing); nobody else waits.
type Inbox struct {
	reader   NoticeReader
	cfg      InboxConfig
	sub      *redisstore.Subscriber
	presence *redisstore.Store // marks who listens here, so their close notices go first
	upgrader websocket.FastHTTPUpgrader
	metrics  *inboxMetrics

	// subMu keeps (un)subscribes in the order they were decided in; held
	// across the Redis write, never by dispatch.
	subMu sync.Mutex

	mu     sync.Mutex
	users  map[int64]*userBox
	total  int
	byAddr map[string]int
	closed bool
	conns  sync.WaitGroup
}

// userBox is one user's subscription and connections on this node.
type userBox struct {
	id        int64
	confirmed chan struct{} // closed when Redis confirmed the subscription (or it failed: err)
	ok        bool
	err       error
	conns     map[*mailbox]bool
}

// NewInbox returns an Inbox subscribing on rdb, replaying from reader,
// metrics on reg. Run must run for connections to be served.
func NewInbox(rdb redis.UniversalClient, reader NoticeReader, cfg InboxConfig, reg prometheus.Registerer) *Inbox {
	cfg = cfg.withDefaults()
	b := &Inbox{reader: reader, cfg: cfg, sub: redisstore.NewNoticeSubscriber(rdb, pubsubBuffer), presence: redisstore.New(rdb),
		metrics: newInboxMetrics(reg), users: map[int64]*userBox{}, byAddr: map[string]int{}}
	b.upgrader = websocket.FastHTTPUpgrader{
		ReadBufferSize: 256, WriteBufferSize: 1024, WriteBufferPool: &sync.Pool{},
		Subprotocols: []string{Subprotocol},
		CheckOrigin:  func(*fasthttp.RequestCtx) bool { return true }, // ServeWS checked it
		Error: func(ctx *fasthttp.RequestCtx, status int, reason error) {
			writeProblem(ctx, status, "invalid_handshake", reason.Error(), 0)
		},
	}
	return b
}

// Run hands each published notice to its user's connections until ctx
// ends; then it closes them all (1001) and returns nil once they are gone.
// Meanwhile it keeps its users marked as listening.
func (b *Inbox) Run(ctx context.Context) error {
	events := b.sub.Events()
	defer b.stop()
	mark := time.NewTicker(redisstore.ListeningTTL / 3)
	defer mark.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			b.dispatch(ev)
		case <-mark.C:
			go b.markListening(ctx, b.listeners()...)
		}
	}
}

// listeners are the users with a connection here.
func (b *Inbox) listeners() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	users := make([]int64, 0, len(b.users))
	for id := range b.users {
		users = append(users, id)
	}
	return users
}

// markListening tells the closer that users listen (their notices of a
// close of thousands go first). Best effort: a user not marked is told
// in turn.
func (b *Inbox) markListening(ctx context.Context, users ...int64) {
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	if err := b.presence.MarkListening(ctx, users...); err != nil {
		b.cfg.Log.Warn("inbox: mark users listening", "users", len(users), "err", err)
	}
}

func (b *Inbox) stop() {
	b.mu.Lock()
	b.closed = true
	var all []*mailbox
	for _, u := range b.users {
		for m := range u.conns {
			all = append(all, m)
		}
	}
	b.mu.Unlock()
	for _, m := range all {
		m.end(websocket.CloseGoingAway, "the node is shutting down")
	}
	_ = b.sub.Close()
	b.conns.Wait()
}

func (b *Inbox) dispatch(ev redisstore.Event) {
	if ev.AuctionID == 0 {
		b.cfg.Log.Warn("inbox: Redis subscription", "err", ev.Err)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.users[ev.AuctionID]
	switch {
	case u == nil:
	case ev.Subscribed && !u.ok:
		u.ok = true
		close(u.confirmed)
	case ev.Subscribed:
		// Again, after a lost connection: what was published meanwhile
		// is only in the list; each connection reads it back.
		for m := range u.conns {
			m.offer(nil)
		}
	default:
		for m := range u.conns {
			m.offer(ev.Notice)
		}
	}
}

// ServeWS is the handler body of GET /ws/me for user, once the gateway
// authenticated them. Refusals come before the upgrade, as problem+json:
// 400 invalid_query (an unknown parameter, an after that is not one of the
// user's notices), 403 origin_not_allowed, 426 upgrade_required, 429
// rate_limited (the user's or the address's connections), 503
// too_many_viewers or unavailable.
func (b *Inbox) ServeWS(ctx *fasthttp.RequestCtx, user int64) {
	if b.cfg.CheckOrigin != nil && !b.cfg.CheckOrigin(string(ctx.Request.Header.Peek("Origin"))) {
		writeProblem(ctx, fasthttp.StatusForbidden, "origin_not_allowed", "this origin may not connect", 0)
		return
	}
	after, ok := b.afterParam(ctx)
	if !ok {
		return
	}
	if !websocket.FastHTTPIsWebSocketUpgrade(ctx) {
		ctx.Response.Header.Set("Upgrade", "websocket")
		writeProblem(ctx, fasthttp.StatusUpgradeRequired, "upgrade_required", "connect with a WebSocket client", 0)
		return
	}
	addr := ctx.RemoteIP().String()
	m, err := b.reserve(user, addr)
	if err != nil {
		status, code := fasthttp.StatusTooManyRequests, "rate_limited"
		if errors.Is(err, errFull) || errors.Is(err, errStopped) {
			status, code = fasthttp.StatusServiceUnavailable, "too_many_viewers"
		} else if !errors.Is(err, errAddrFull) && !errors.Is(err, errUserFull) {
			status, code = fasthttp.StatusServiceUnavailable, "unavailable"
		}
		writeProblem(ctx, status, code, "no live connection now: "+err.Error(), retryFullSeconds)
		return
	}
	// Not derived from ctx: fasthttp reuses it once the handler returns.
	jctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	// Registered and subscribed before the replay is read: a notice stored
	// after the read is published after it, so it reaches the queue.
	if err := b.await(jctx, m.user); err != nil {
		b.release(m)
		b.cfg.Log.Warn("inbox: refuse connection", "err", err)
		writeProblem(ctx, fasthttp.StatusServiceUnavailable, "unavailable", "live notices are unavailable; retry later", 0)
		return
	}
	var replay []bidgate.Notice
	if after != "" {
		var err error
		replay, err = b.missedSince(jctx, user, after)
		if err != nil {
			b.release(m)
			if errors.Is(err, bidgate.ErrNoticeNotFound) {
				writeProblem(ctx, fasthttp.StatusBadRequest, "invalid_query", "after: not a notice of yours", 0)
				return
			}
			b.cfg.Log.Warn("inbox: read missed notices", "err", err)
			writeProblem(ctx, fasthttp.StatusServiceUnavailable, "unavailable", "notices cannot be read now; retry later", 0)
			return
		}
		m.last = after
	}
	lease := time.AfterFunc(handshakeGrace, func() { b.release(m) })
	err = b.upgrader.Upgrade(ctx, func(conn *websocket.Conn) {
		if !lease.Stop() {
			_ = conn.Close()
			return
		}
		m.serve(conn, replay)
	})
	if err != nil && lease.Stop() {
		b.release(m)
	}
}

// missedSince reads what user's notices were stored after the notice
// after, oldest first, at most replayLimit.
func (b *Inbox) missedSince(ctx context.Context, user int64, after string) ([]bidgate.Notice, error) {
	page, err := b.reader.Notifications(ctx, bidgate.NotificationsQuery{UserID: user, After: after, Limit: replayLimit})
	if err != nil {
		return nil, err
	}
	slices.Reverse(page.Items)
	return page.Items, nil
}

// afterParam reads ?after=, the only parameter; false when it answered 400.
// An unknown parameter is not echoed back: it may be a token someone put in
// the URL.
func (b *Inbox) afterParam(ctx *fasthttp.RequestCtx) (string, bool) {
	var after, bad string
	for k, v := range ctx.QueryArgs().All() {
		switch {
		case string(k) != "after":
			bad = "an unknown parameter: /ws/me takes after only"
		case after != "":
			bad = "after: given twice"
		case !bidgate.ValidNoticeID(string(v)):
			bad = "after: not a notice id"
		default:
			after = string(v)
		}
	}
	if bad != "" {
		writeProblem(ctx, fasthttp.StatusBadRequest, "invalid_query", bad, 0)
		return "", false
	}
	return after, true
}

var errUserFull = errors.New("this user holds as many live connections as they may; close some first")

// reserve counts a connection against the caps and registers its mailbox;
// the user's first connection here subscribes them (outside mu: dispatch
// never waits for Redis).
func (b *Inbox) reserve(user int64, addr string) (*mailbox, error) {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	b.mu.Lock()
	u := b.users[user]
	switch {
	case b.closed:
		b.mu.Unlock()
		return nil, errStopped
	case b.total >= b.cfg.MaxConns:
		b.mu.Unlock()
		return nil, errFull
	case b.byAddr[addr] >= b.cfg.MaxPerAddr:
		b.mu.Unlock()
		return nil, errAddrFull
	case u != nil && len(u.conns) >= b.cfg.MaxPerUser:
		b.mu.Unlock()
		return nil, errUserFull
	}
	first := u == nil
	if first {
		u = &userBox{id: user, confirmed: make(chan struct{}), conns: map[*mailbox]bool{}}
		b.users[user] = u
	}
	m := newMailbox(b, u, addr)
	u.conns[m] = true
	b.total++
	b.byAddr[addr]++
	b.conns.Add(1)
	b.mu.Unlock()
	if first {
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		err := b.sub.Subscribe(ctx, user)
		cancel()
		if err != nil {
			b.mu.Lock()
			u.err = err
			if !u.ok {
				u.ok = true
				close(u.confirmed)
			}
			b.mu.Unlock()
			b.releaseLocked(m)
			return nil, err
		}
		b.markListening(context.Background(), user)
	}
	return m, nil
}

func (b *Inbox) await(ctx context.Context, u *userBox) error {
	select {
	case <-u.confirmed:
		b.mu.Lock()
		defer b.mu.Unlock()
		return u.err
	case <-ctx.Done():
		return errors.New("inbox: Redis did not confirm the subscription in time")
	}
}

// release gives back m's slot, and its user's subscription with their
// last connection here; exactly once per mailbox.
func (b *Inbox) release(m *mailbox) {
	b.subMu.Lock()
	defer b.subMu.Unlock()
	b.releaseLocked(m)
}

// releaseLocked is release with subMu held.
func (b *Inbox) releaseLocked(m *mailbox) {
	m.released.Do(func() {
		b.mu.Lock()
		u := m.user
		delete(u.conns, m)
		b.total--
		if b.byAddr[m.addr]--; b.byAddr[m.addr] <= 0 {
			delete(b.byAddr, m.addr)
		}
		last := len(u.conns) == 0 && b.users[u.id] == u
		if last {
			delete(b.users, u.id)
		}
		b.mu.Unlock()
		if last && u.err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
			b.sub.Unsubscribe(ctx, u.id)
			cancel()
		}
		b.conns.Done()
	})
}
