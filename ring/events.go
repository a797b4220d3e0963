package ring

import (
	"fmt"
	"runtime/debug"
	"time"
)

// Dead and left members stay in Members() this long, so that an operator
// (or GET /cluster/members) sees who went away; then they are forgotten.
// Every process incarnation has its own name, so without this the table
// would grow by one entry per restart.
const (
	forgetAfter = time.Minute
	pruneEvery  = 10 * time.Second
)

// entry is the ring's record of one memberlist node (one incarnation).
type entry struct {
	member  Member
	leaving bool      // its metadata says it is leaving: off the ring already
	valid   bool      // its metadata decoded; if not it is listed, never an owner
	goneAt  time.Time // when it was seen to leave or die
}

// run is the ring's goroutine: the only one that touches r.table, builds
// owner tables and calls OnChange. It never calls memberlist, so memberlist
// can never wait on it.
func (r *Ring) run() {
	defer close(r.done)
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-r.stopping:
			return
		case <-r.q.wake:
			r.handle(r.q.take())
		case now := <-prune.C:
			if r.forget(now) {
				r.guard("rebuild after forgetting members", r.publish)
			}
		}
	}
}

// handle applies a batch of events, publishes one new snapshot for all of
// them, then reports each change: OnChange always sees an owner table that
// already includes the change it is told about.
func (r *Ring) handle(batch []event) {
	var (
		changes []Change
		synced  []chan struct{}
	)
	for _, e := range batch {
		if e.kind == evSync {
			synced = append(synced, e.done)
			continue
		}
		r.guard("apply membership event", func() {
			if c, ok := r.apply(e, time.Now()); ok {
				changes = append(changes, c)
			}
		})
	}
	if len(changes) > 0 {
		r.guard("rebuild owner table", r.publish)
	}
	for _, c := range changes {
		r.metrics.changes.WithLabelValues(c.Kind).Inc()
		m := c.Member
		r.log.Info("ring: membership change", "kind", c.Kind, "name", m.Name, "id", m.ID,
			"state", m.State, "roles", m.Roles, "internal_addr", m.InternalAddr, "self", m.Name == r.name)
		if r.cfg.OnChange != nil {
			r.guard("OnChange", func() { r.cfg.OnChange(c) })
		}
	}
	for _, done := range synced {
		close(done)
	}
}

// apply records one event in the table and says what changed, if anything.
func (r *Ring) apply(e event, now time.Time) (Change, bool) {
	switch e.kind {
	case evJoin, evUpdate:
		m, leaving, err := memberOf(&e.node, StateAlive)
		if err != nil {
			r.log.Warn("ring: member has no usable metadata; it owns nothing", "err", err)
		}
		kind := KindUpdate
		if prev, ok := r.table[m.Name]; e.kind == evJoin || !ok || prev.member.State != StateAlive {
			kind = KindJoin
		}
		r.table[m.Name] = &entry{member: m, leaving: leaving, valid: err == nil}
		return Change{Kind: kind, Member: m}, true

	case evLeave:
		// The leave carries the node's last metadata, with the leaving flag
		// if its update got here first.
		m, leaving, err := memberOf(&e.node, StateDead)
		en := entry{member: m, leaving: leaving, valid: err == nil}
		if prev, ok := r.table[m.Name]; ok {
			if prev.member.State != StateAlive {
				return Change{}, false // already gone
			}
			if err != nil {
				en.member = prev.member
			}
			en.leaving = en.leaving || prev.leaving
		}
		en.member.State = StateDead
		if en.leaving {
			en.member.State = StateLeft
		}
		en.goneAt = now
		r.table[m.Name] = &en
		return Change{Kind: KindLeave, Member: en.member}, true
	}
	return Change{}, false
}

// forget drops members gone for longer than forgetAfter.
func (r *Ring) forget(now time.Time) bool {
	dropped := false
	for name, e := range r.table {
		if !e.goneAt.IsZero() && now.Sub(e.goneAt) > forgetAfter {
			delete(r.table, name)
			dropped = true
		}
	}
	return dropped
}

// publish builds a snapshot of the table and stores it for the readers.
// If consistent cannot place the partitions (it panics; see
// buildOwnership), the previous owner table stays in force and the panic is
// counted.
func (r *Ring) publish() {
	prev := r.snap.Load()
	s := &snapshot{self: r.self, members: make([]Member, 0, len(r.table))}
	for _, e := range r.table {
		s.members = append(s.members, e.member)
		if e.member.State == StateAlive {
			s.alive++
		}
	}
	sortMembers(s.members)
	if e, ok := r.table[r.name]; ok {
		s.self = e.member
	}
	own, err := buildOwnership(r.params, ringMembers(r.table))
	if err != nil {
		r.metrics.panics.Inc()
		r.log.Error("ring: owner table not rebuilt, the previous one stays in force", "err", err)
		own = prev.own
	}
	s.own = own
	r.snap.Store(s)
	r.metrics.alive.Set(float64(s.alive))
	r.metrics.shards.Set(float64(len(own.shards)))
	if n := len(own.shards); n > r.params.partitions {
		r.log.Warn("ring: more shard members than partitions; some own nothing", "shards", n, "partitions", r.params.partitions)
	}
}

// guard runs fn and turns a panic into a log line and a count: a
// membership event must never take the process down.
func (r *Ring) guard(what string, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			r.metrics.panics.Inc()
			r.log.Error("ring: recovered panic", "in", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	fn()
}
