// Package fanout pushes auctions' live state to WebSocket viewers.
//
// Every node subscribes to the updates of each auction it has viewers of
// (redisstore.Subscriber: sharded pub/sub, one connection per Redis
// primary), so that a viewer may connect to any node whoever decides the
// bids. States
// published on a channel are coalesced per auction: only the newest is kept
// and it is sent at most once per Config.Interval, encoded once for all the
// auction's viewers. A viewer gets a snapshot, then updates with a rising
// seq, then the CLOSED state, and the server closes the socket normally.
package fanout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/persist/redisstore"
)

// Config tunes a Hub. Zero values take DefaultConfig's.
type Config struct {
	Interval time.Duration // at most one message per auction per Interval
	// MaxInterval is how far Interval stretches while the node is
	// overloaded (governor.go); equal to Interval, it never does.
	MaxInterval time.Duration
	// OverloadLatency is the p99 of the Go scheduler's latency past which
	// the node counts as overloaded.
	OverloadLatency time.Duration
	MaxViewers      int // per node; beyond it a connect is answered 503
	// MaxViewersPerAddr bounds the viewers of one client address; beyond it
	// a connect is answered 429.
	MaxViewersPerAddr int
	PingInterval      time.Duration // a viewer that does not pong within 2*PingInterval is dropped
	WriteTimeout      time.Duration // per message write
	SlowTimeout       time.Duration // a viewer whose queue keeps overflowing this long is closed
	// CheckOrigin gets the request's Origin header ("" when the client sent
	// none) and says whether it may connect; nil allows every origin.
	CheckOrigin func(origin string) bool
	Log         *slog.Logger
}

// DefaultConfig is the one statement of the fan-out defaults: New fills a
// zero field from it, and the command line's flags take theirs from it.
func DefaultConfig() Config {
	return Config{Interval: 150 * time.Millisecond, MaxInterval: 2 * time.Second, OverloadLatency: 20 * time.Millisecond,
		PingInterval: 20 * time.Second, WriteTimeout: 5 * time.Second,
		SlowTimeout: 5 * time.Second, MaxViewers: 20000, MaxViewersPerAddr: 256, Log: slog.Default()}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Interval = cmp.Or(c.Interval, d.Interval)
	c.MaxInterval = max(cmp.Or(c.MaxInterval, d.MaxInterval), c.Interval)
	c.OverloadLatency = cmp.Or(c.OverloadLatency, d.OverloadLatency)
	c.MaxViewers = cmp.Or(c.MaxViewers, d.MaxViewers)
	c.MaxViewersPerAddr = cmp.Or(c.MaxViewersPerAddr, d.MaxViewersPerAddr)
	c.PingInterval = cmp.Or(c.PingInterval, d.PingInterval)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, d.WriteTimeout)
	c.SlowTimeout = cmp.Or(c.SlowTimeout, d.SlowTimeout)
	c.Log = cmp.Or(c.Log, d.Log)
	return c
}

// Validate reports the settings a Hub cannot run with. It checks c as it
// is, zero fields included: the command line's flags start from
// DefaultConfig, so a zero there was asked for.
func (c Config) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Interval", c.Interval}, {"OverloadLatency", c.OverloadLatency}, {"PingInterval", c.PingInterval}, {"WriteTimeout", c.WriteTimeout}, {"SlowTimeout", c.SlowTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"MaxViewers", c.MaxViewers}, {"MaxViewersPerAddr", c.MaxViewersPerAddr}} {
		if n.v < 1 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", n.name, n.v))
		}
	}
	if c.MaxInterval < c.Interval {
		errs = append(errs, fmt.Errorf("MaxInterval (%v) must be at least Interval (%v)", c.MaxInterval, c.Interval))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fanout: %w", err)
	}
	return nil
}

// Snapshotter gives the current state of an auction (the shard's Auction
// method fits). An unknown auction is an error wrapping
// bidgate.ErrAuctionNotFound.
type Snapshotter interface {
	Auction(ctx context.Context, id int64) (bidgate.Auction, error)
}

const (
	// joinTimeout bounds the work before an upgrade (the subscription's
	// confirmation, the snapshot) and each snapshot read after it.
	joinTimeout = 5 * time.Second
	// pubsubBuffer is how many Redis events may wait for the dispatcher.
	pubsubBuffer = 4096
	// resyncParallel bounds the snapshot reads after a Redis reconnect,
	// when every room asks at once.
	resyncParallel = 8
)

var (
	errStopped = errors.New("fanout: hub stopped")
	// errAddrFull: one client address holds as many viewers as it may.
	errAddrFull = errors.New("fanout: too many viewers from this address")
	errFull     = errors.New("fanout: too many viewers")
)

// Hub is one node's fan-out: its Redis subscription, its rooms (one per
// auction with viewers here) and its viewers.
type Hub struct {
	snap     Snapshotter
	cfg      Config
	metrics  *metrics
	governor *governor
	log      *slog.Logger
	sub      *redisstore.Subscriber
	upgrader websocket.FastHTTPUpgrader
	resync   chan struct{} // semaphore of resyncParallel
	endGrace time.Duration // see defaultEndGrace; tests shorten it
	// flushed, when set (by tests, before Run), is told every flush of a
	// room: the auction, the server's time of the flush and the state it
	// sends. Flushes of one room are told in order.
	flushed func(auction int64, at time.Time, u bidgate.StateUpdate)

	// subMu serializes the decision to (un)subscribe a channel with the
	// SUBSCRIBE or UNSUBSCRIBE itself, so that Redis sees them in the order
	// they were decided in. It is held for a command's network write, so
	// the dispatcher never takes it.
	subMu sync.Mutex

	mu       sync.Mutex
	rooms    map[int64]*room // by auction
	reserved int             // viewer slots taken, handshakes included
	byAddr   map[string]int  // the same, per client address
	stopped  bool
	stopping chan struct{} // closed when Run ends
	leases   sync.WaitGroup
}

// New returns a Hub that reads auctions from snap and subscribes on rdb,
// with its metrics on reg (nil: not registered). Run must run for viewers
// to be served.
func New(rdb redis.UniversalClient, snap Snapshotter, cfg Config, reg prometheus.Registerer) *Hub {
	cfg = cfg.withDefaults()
	m := newMetrics(reg)
	h := &Hub{snap: snap, cfg: cfg, metrics: m, governor: newGovernor(cfg, m), log: cfg.Log,
		sub:      redisstore.NewSubscriber(rdb, pubsubBuffer),
		resync:   make(chan struct{}, resyncParallel),
		endGrace: defaultEndGrace,
		rooms:    make(map[int64]*room),
		stopping: make(chan struct{}),
	}
	h.upgrader = websocket.FastHTTPUpgrader{
		// Viewers send nothing but control frames, and data frames are
		// written prepared (without the connection's buffer): small buffers
		// keep 10,000 connections cheap.
		ReadBufferSize:  256,
		WriteBufferSize: 256,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     func(*fasthttp.RequestCtx) bool { return true }, // ServeWS checked it
		Error: func(ctx *fasthttp.RequestCtx, status int, reason error) {
			writeProblem(ctx, status, "invalid_handshake", reason.Error(), 0)
		},
	}
	return h
}

// Run reads the node's Redis subscription and hands each auction's states
// to its room, until ctx ends. Then it closes every viewer (close code
// 1001), closes the subscription and returns nil once the viewers are gone.
// Run is called once per Hub.
func (h *Hub) Run(ctx context.Context) error {
	events := h.sub.Events()
	defer h.stop()
	gctx, stopGovernor := context.WithCancel(ctx)
	defer stopGovernor()
	go h.governor.run(gctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			h.dispatch(ev)
		}
	}
}

func (h *Hub) stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	close(h.stopping)
	rooms := make([]*room, 0, len(h.rooms))
	for _, r := range h.rooms {
		rooms = append(rooms, r)
	}
	h.mu.Unlock()
	for _, r := range rooms {
		r.signalAll(evStop)
	}
	_ = h.sub.Close()
	h.leases.Wait()
}

func (h *Hub) isStopping() bool {
	select {
	case <-h.stopping:
		return true
	default:
		return false
	}
}

// dispatch never blocks on I/O: one slow step here would delay every
// auction of the node.
func (h *Hub) dispatch(ev redisstore.Event) {
	if ev.AuctionID == 0 {
		h.metrics.subscriptionsLost.Inc()
		h.log.Warn("fanout: Redis subscription", "err", ev.Err)
		return
	}
	r := h.room(ev.AuctionID)
	switch {
	case r == nil:
		// published before our unsubscribe took effect
	case ev.Subscribed:
		if r.confirm() {
			// Its joiners may all have given up while Redis was confirming.
			go h.dropIfIdle(r)
		} else {
			// Subscribed again after a lost connection or a moved slot:
			// states published meanwhile were missed, so read the current one.
			go h.refresh(r)
		}
	case ev.Err != nil:
		h.log.Warn("fanout: ignore malformed state", "auction", ev.AuctionID, "err", ev.Err)
	default:
		r.update(ev.Update.StateUpdate())
	}
}

func (h *Hub) room(id int64) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rooms[id]
}

// refresh reads an auction's current state into its room.
func (h *Hub) refresh(r *room) {
	h.resync <- struct{}{}
	defer func() { <-h.resync }()
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	a, err := h.snap.Auction(ctx, r.id)
	if err != nil {
		h.log.Warn("fanout: refresh after a Redis reconnect", "auction", r.id, "err", err)
		return
	}
	r.observe(bidgate.NewStateUpdate(a), false)
}

// join returns the auction's room once its subscription is active in Redis,
// so that a snapshot read afterwards misses no later state. Every join is
// paired with a leave.
func (h *Hub) join(ctx context.Context, id int64) (*room, error) {
	h.subMu.Lock()
	h.mu.Lock()
	r := h.rooms[id]
	fresh := r == nil
	if fresh {
		r = newRoom(h, id)
		h.rooms[id] = r
	}
	h.mu.Unlock()
	r.refs++
	if fresh {
		if err := h.sub.Subscribe(ctx, id); err != nil {
			r.refs--
			h.mu.Lock()
			delete(h.rooms, id)
			h.mu.Unlock()
			h.subMu.Unlock()
			return nil, err
		}
		h.metrics.subscriptions.Inc()
	}
	h.subMu.Unlock()

	select {
	case <-r.ready:
		return r, nil
	case <-ctx.Done():
		h.leave(r)
		return nil, fmt.Errorf("wait for the subscription to auction %d: %w", id, context.Cause(ctx))
	case <-h.stopping:
		h.leave(r)
		return nil, errStopped
	}
}

// leave undoes a join; the last viewer to leave unsubscribes. A room whose
// SUBSCRIBE is not confirmed yet stays until it is (dropIfIdle), so that a
// new room of the same channel never takes an old confirmation for its own.
func (h *Hub) leave(r *room) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	r.refs--
	if r.refs == 0 && r.isReady() {
		h.drop(r)
	}
}

func (h *Hub) dropIfIdle(r *room) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	if r.refs == 0 {
		h.drop(r)
	}
}

// drop removes an idle room and unsubscribes its auction; subMu is held.
func (h *Hub) drop(r *room) {
	h.mu.Lock()
	if h.rooms[r.id] != r {
		h.mu.Unlock()
		return
	}
	delete(h.rooms, r.id)
	stopped := h.stopped
	h.mu.Unlock()
	r.stop()
	h.metrics.subscriptions.Dec()
	if !stopped {
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		defer cancel()
		h.sub.Unsubscribe(ctx, r.id)
	}
}

// reserve takes a viewer slot for a client address; Run waits for every
// slot to be given back.
func (h *Hub) reserve(addr string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped:
		return errStopped
	case h.reserved >= h.cfg.MaxViewers:
		return errFull
	case h.byAddr[addr] >= h.cfg.MaxViewersPerAddr:
		return errAddrFull
	}
	if h.byAddr == nil {
		h.byAddr = map[string]int{}
	}
	h.reserved++
	h.byAddr[addr]++
	h.leases.Add(1)
	return nil
}

func (h *Hub) unreserve(addr string) {
	h.mu.Lock()
	h.reserved--
	if h.byAddr[addr]--; h.byAddr[addr] <= 0 {
		delete(h.byAddr, addr)
	}
	h.mu.Unlock()
	h.leases.Done()
}
