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

// rejectFor is how long a member whose answer to a forwarded bid did not
// verify stays off this node's ring (Ring.Reject). Its join proof checked
// out, so the failure may be passing (an answer the owner's HTTP server
// made by itself when overloaded, a proxy in the way); after this it is
// admitted again, and one more bad answer rejects it again. A member whose
// join proof fails stays rejected for as long as it fails.
const rejectFor = time.Minute

// Reasons of bidgate_ring_rejected_members_total.
const (
	rejectProof  = "proof"  // the join proof in its metadata is missing or wrong
	rejectAnswer = "answer" // its answer to a forwarded bid did not verify
)

// entry is the ring's record of one memberlist node (one incarnation).
type entry struct {
	member  Member
	leaving bool      // its metadata says it is leaving: off the ring already
	valid   bool      // its metadata decoded; if not it is listed, never an owner
	goneAt  time.Time // when it was seen to leave or die

	// rejectedBy is why this node refuses the member on its ring
	// (rejectProof, rejectAnswer; "" when admitted), detail the words for
	// the log, until when an answer rejection ends.
	rejectedBy, detail string
	until              time.Time
}

// settle sets what follows from the entry's rejection, and counts and
// logs it when it is new (once per rejection, however many updates the
// member sends meanwhile).
func (r *Ring) settle(en *entry, prev *entry, addr string) {
	if en.rejectedBy == "" {
		en.member.Verified = r.proofs.enabled() && en.valid
		return
	}
	en.member.State = StateRejected
	en.member.Verified = false
	if prev != nil && prev.rejectedBy == en.rejectedBy && present(prev.member.State) {
		return // already counted and logged
	}
	r.metrics.reject.WithLabelValues(en.rejectedBy).Inc()
	m := en.member
	r.log.Warn("ring: member rejected: it owns no auction on this node's ring and is sent no bids",
		"name", m.Name, "id", m.ID, "gossip_addr", addr, "internal_addr", m.InternalAddr, "reason", en.rejectedBy, "detail", en.detail)
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
			forgot := r.forget(now)
			back := r.readmit(now)
			if forgot || len(back) > 0 {
				r.guard("rebuild after forgetting or readmitting members", r.publish)
			}
			r.report(back)
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
	r.report(changes)
	for _, done := range synced {
		close(done)
	}
}

// report counts, logs and hands OnChange the changes, once the published
// owner table includes them.
func (r *Ring) report(changes []Change) {
	for _, c := range changes {
		r.metrics.changes.WithLabelValues(c.Kind).Inc()
		m := c.Member
		r.log.Info("ring: membership change", "kind", c.Kind, "name", m.Name, "id", m.ID,
			"state", m.State, "roles", m.Roles, "internal_addr", m.InternalAddr, "self", m.Name == r.name)
		if r.cfg.OnChange != nil {
			r.guard("OnChange", func() { r.cfg.OnChange(c) })
		}
	}
}

// apply records one event in the table and says what changed, if anything.
func (r *Ring) apply(e event, now time.Time) (Change, bool) {
	switch e.kind {
	case evJoin, evUpdate:
		m, md, err := decodeMember(&e.node, StateAlive)
		if err != nil {
			r.log.Warn("ring: member has no usable metadata; it owns nothing", "err", err)
		}
		prev := r.table[m.Name]
		kind := KindUpdate
		if e.kind == evJoin || prev == nil || !present(prev.member.State) {
			kind = KindJoin
		}
		en := &entry{member: m, leaving: md.Leaving, valid: err == nil}
		if err == nil && r.proofs.enabled() {
			if perr := r.proofs.check(m.Name, md); perr != nil {
				en.rejectedBy, en.detail = rejectProof, perr.Error()
			} else if prev != nil && prev.rejectedBy == rejectAnswer && now.Before(prev.until) {
				en.rejectedBy, en.detail, en.until = prev.rejectedBy, prev.detail, prev.until
			}
		}
		r.settle(en, prev, e.node.Address())
		r.table[m.Name] = en
		return Change{Kind: kind, Member: en.member}, true

	case evLeave:
		// The leave carries the node's last metadata, with the leaving flag
		// if its update got here first.
		m, md, err := decodeMember(&e.node, StateDead)
		en := entry{member: m, leaving: md.Leaving, valid: err == nil}
		if prev, ok := r.table[m.Name]; ok {
			if !present(prev.member.State) {
				return Change{}, false // already gone
			}
			if err != nil {
				en.member = prev.member
			}
			en.leaving = en.leaving || prev.leaving
			en.rejectedBy, en.detail, en.until = prev.rejectedBy, prev.detail, prev.until
		}
		en.member.State = StateDead
		if en.leaving {
			en.member.State = StateLeft
		}
		en.member.Verified = false
		en.goneAt = now
		r.table[m.Name] = &en
		return Change{Kind: KindLeave, Member: en.member}, true

	case evReject:
		en, ok := r.table[e.node.Name]
		if !ok || en.member.State != StateAlive {
			return Change{}, false // unknown, gone, or rejected already
		}
		en.rejectedBy, en.detail, en.until = rejectAnswer, e.reason, now.Add(rejectFor)
		r.settle(en, nil, "")
		return Change{Kind: KindReject, Member: en.member}, true
	}
	return Change{}, false
}

// readmit ends the answer rejections that are over (rejectFor) and returns
// the members admitted again.
func (r *Ring) readmit(now time.Time) []Change {
	var back []Change
	for _, en := range r.table {
		if en.rejectedBy != rejectAnswer || en.member.State != StateRejected || now.Before(en.until) {
			continue
		}
		en.rejectedBy, en.detail, en.until = "", "", time.Time{}
		en.member.State = StateAlive
		r.settle(en, nil, "")
		r.log.Info("ring: rejected member admitted again; another bad answer rejects it again", "name", en.member.Name, "id", en.member.ID)
		back = append(back, Change{Kind: KindUpdate, Member: en.member})
	}
	return back
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
