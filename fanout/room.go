package fanout

import (
	"context"
	"sync"
	"time"

	"bidgate"
)

// defaultEndGrace is how long past its end an auction's room waits for the
// closer's CLOSED announcement before asking the snapshotter itself.
const defaultEndGrace = 15 * time.Second

// room is one auction's viewers on this node and the coalescing in front of
// them: it keeps only the newest state and flushes it to every viewer at
// most once per interval (Config.Interval, stretched by the governor under
// overload), so that the work per viewer does not grow with the auction's
// bid rate.
type room struct {
	hub *Hub
	id  int64

	// refs counts the viewers holding the subscription, handshakes in
	// progress included. Guarded by hub.subMu.
	refs      int
	ready     chan struct{} // closed when Redis confirmed the subscription
	readyOnce sync.Once

	// mu guards the coalescing state. The Redis reader takes it for every
	// message, so it is never held for I/O or for a broadcast.
	mu         sync.Mutex
	latest     bidgate.StateUpdate
	latestRank rank
	dirty      bool // latest has not been flushed yet
	scheduled  bool // a flush is pending or running
	lastFlush  time.Time
	endAt      time.Time   // the latest end time seen
	endTimer   *time.Timer // fires the hub's endGrace after endAt
	stopped    bool

	vmu     sync.Mutex // guards viewers and last
	viewers map[*viewer]struct{}
	last    *message // the newest message flushed, for viewers who register after it
}

func newRoom(h *Hub, id int64) *room {
	return &room{hub: h, id: id,
		ready: make(chan struct{}), viewers: make(map[*viewer]struct{})}
}

// confirm marks the subscription as active and reports whether this was its
// first confirmation (a later one follows a lost connection or a moved slot).
func (r *room) confirm() (first bool) {
	r.readyOnce.Do(func() {
		close(r.ready)
		first = true
	})
	return first
}

func (r *room) isReady() bool {
	select {
	case <-r.ready:
		return true
	default:
		return false
	}
}

// update takes a state published on the auction's channel.
func (r *room) update(u bidgate.StateUpdate) { r.observe(u, true) }

// observe keeps u if it is newer than the room's latest state and makes sure
// a flush will send it. The first state after a quiet Interval goes out at
// once; later ones wait for the Interval since the previous flush, and only
// the newest of them is sent. count says whether a dropped state is counted
// as coalesced (snapshots read for a viewer are not published states).
func (r *room) observe(u bidgate.StateUpdate, count bool) {
	rk := rankOf(u)
	r.mu.Lock()
	defer r.mu.Unlock()
	if u.Leader == nil && u.LeaderID != 0 && u.LeaderID == r.latest.LeaderID {
		u.Leader = r.latest.Leader // the closer's update names no alias; the leader is the same
	}
	if !rk.newer(r.latestRank) {
		if count {
			r.hub.metrics.coalesced.Inc()
		}
		return
	}
	if r.dirty && count {
		r.hub.metrics.coalesced.Inc()
	}
	r.latest, r.latestRank, r.dirty = u, rk, true
	r.scheduleLocked()
}

func (r *room) scheduleLocked() {
	if r.scheduled || !r.dirty || r.stopped {
		return
	}
	r.scheduled = true
	// A time in the past (the first update after a quiet period) fires at once.
	time.AfterFunc(time.Until(r.lastFlush.Add(r.hub.governor.current())), r.flush)
}

// flush encodes the newest state once and offers it to every viewer. Only
// one flush of a room runs at a time (scheduled stays set until it ends).
func (r *room) flush() {
	r.mu.Lock()
	u := r.latest
	r.dirty = false
	r.lastFlush = time.Now()
	at := r.lastFlush
	interval := r.hub.governor.current()
	r.mu.Unlock()
	if r.hub.flushed != nil {
		r.hub.flushed(r.id, at, u)
	}

	if m, err := encode(typeUpdate, u, interval); err != nil {
		r.hub.log.Error("fanout: drop state", "auction", r.id, "err", err)
	} else {
		r.broadcast(m)
	}
	r.watchEnd(u)

	r.mu.Lock()
	r.scheduled = false
	r.scheduleLocked()
	r.mu.Unlock()
}

// broadcast never blocks on a viewer: offer only swaps the viewer's queued
// message, so one slow connection cannot hold up the others.
func (r *room) broadcast(m *message) {
	r.vmu.Lock()
	defer r.vmu.Unlock()
	r.last = m
	for v := range r.viewers {
		v.offer(m)
	}
}

// register adds a viewer who was sent snap. A message flushed between the
// snapshot's read and now is offered to it at once (the viewer drops it
// unless it is newer than snap); a snapshot newer than what the room has
// flushed is flushed to the viewers who joined before.
func (r *room) register(v *viewer, snap bidgate.StateUpdate) {
	r.vmu.Lock()
	r.viewers[v] = struct{}{}
	if r.last != nil {
		v.offer(r.last)
	}
	r.vmu.Unlock()
	r.observe(snap, false)
	r.watchEnd(snap)
}

// signalAll hands every viewer of the room an event.
func (r *room) signalAll(ev uint32) {
	r.vmu.Lock()
	defer r.vmu.Unlock()
	for v := range r.viewers {
		v.signal(ev)
	}
}

func (r *room) unregister(v *viewer) {
	r.vmu.Lock()
	delete(r.viewers, v)
	r.vmu.Unlock()
}

// stop ends the room's timers once its last viewer has left.
func (r *room) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.endTimer != nil {
		r.endTimer.Stop()
	}
}

// watchEnd arms the end check for the end time of u. The closer's CLOSED
// announcement is best effort, and a node misses it while its Redis
// connection is down; without this check the viewers of such an auction
// would wait for the end forever.
func (r *room) watchEnd(u bidgate.StateUpdate) {
	if u.Status.Final() {
		return
	}
	end, err := time.Parse(time.RFC3339Nano, u.EndTime)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if end.After(r.endAt) {
		r.endAt = end
	}
	if r.endTimer == nil && !r.stopped {
		r.endTimer = time.AfterFunc(time.Until(r.endAt.Add(r.hub.endGrace)), r.checkEnd)
	}
}

// checkEnd runs endGrace after the auction's end: unless the room has seen
// it closed (or the end moved), it reads the auction and, if it is closed,
// flushes that final state like a published one.
func (r *room) checkEnd() {
	r.mu.Lock()
	if r.stopped || r.latestRank.closed {
		r.mu.Unlock()
		return
	}
	if wait := time.Until(r.endAt.Add(r.hub.endGrace)); wait > 0 {
		r.endTimer.Reset(wait)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	a, err := r.hub.snap.Auction(ctx, r.id)
	cancel()
	if err == nil && a.Status.Final() {
		r.observe(bidgate.NewStateUpdate(a), false)
		return
	}
	if err != nil {
		r.hub.log.Warn("fanout: check whether an ended auction is closed", "auction", r.id, "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && a.EndTime.After(r.endAt) {
		r.endAt = a.EndTime
	}
	if !r.stopped {
		r.endTimer.Reset(max(time.Until(r.endAt.Add(r.hub.endGrace)), r.hub.endGrace))
	}
}
