package ring

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	alive   prometheus.Gauge
	shards  prometheus.Gauge
	changes *prometheus.CounterVec
	panics  prometheus.Counter
	reject  *prometheus.CounterVec

	reg prometheus.Registerer
}

// newMetrics registers the metrics on reg (nil: none). They describe one
// Ring, so a registry that already has them is an error: several Rings in
// one process need distinct registerers, for example
// prometheus.WrapRegistererWith(prometheus.Labels{"node": id}, reg).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	var r *undoable
	f := promauto.With(nil)
	if reg != nil {
		r = &undoable{reg: reg}
		f = promauto.With(r)
	}
	m := &metrics{
		alive: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_ring_alive_members",
			Help: "Cluster members this node sees alive, all roles.",
		}),
		shards: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_ring_shard_members",
			Help: "Shard members on this node's ownership ring.",
		}),
		changes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_ring_changes_total",
			Help: "Membership changes seen, by kind (join, leave, update).",
		}, []string{"kind"}),
		panics: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_ring_panics_total",
			Help: "Panics recovered while applying a membership change (the previous owner table stayed in force).",
		}),
		reject: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_ring_rejected_members_total",
			Help: "Members this node refused on its ownership ring, by reason: proof (their gossiped join proof is missing or not made with the cluster secret) or answer (their answer to a forwarded bid did not verify).",
		}, []string{"reason"}),
	}
	if r != nil {
		if err := r.err; err != nil {
			r.undo()
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return nil, fmt.Errorf("ring: metrics already registered (another Ring on this registerer?): %w", err)
			}
			return nil, fmt.Errorf("ring: register metrics: %w", err)
		}
		m.reg = reg
	}
	for _, k := range []string{KindJoin, KindLeave, KindUpdate} {
		m.changes.WithLabelValues(k)
	}
	m.changes.WithLabelValues(KindReject)
	for _, reason := range []string{rejectProof, rejectAnswer} {
		m.reject.WithLabelValues(reason)
	}
	return m, nil
}

// undoable registers through promauto without its panic: Join reports a
// registry that is in use as an error, and registers all or nothing.
type undoable struct {
	reg  prometheus.Registerer
	done []prometheus.Collector
	err  error // the first failure; nothing is registered after it
}

func (u *undoable) Register(c prometheus.Collector) error {
	if u.err != nil {
		return u.err
	}
	if u.err = u.reg.Register(c); u.err != nil {
		return u.err
	}
	u.done = append(u.done, c)
	return nil
}

// MustRegister is what promauto calls.
func (u *undoable) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = u.Register(c) // kept in u.err
	}
}

func (u *undoable) Unregister(c prometheus.Collector) bool { return u.reg.Unregister(c) }

// undo unregisters what was registered before the failure.
func (u *undoable) undo() {
	for _, c := range u.done {
		u.reg.Unregister(c)
	}
}

// unregister removes the metrics again, so that a new Ring (a restart in
// the same process, a test) can register its own.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{m.alive, m.shards, m.changes, m.panics, m.reject} {
		m.reg.Unregister(c)
	}
	m.reg = nil
}
