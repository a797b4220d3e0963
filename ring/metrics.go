package ring

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	alive   prometheus.Gauge
	shards  prometheus.Gauge
	changes *prometheus.CounterVec
	panics  prometheus.Counter

	reg prometheus.Registerer
}

func newMetrics() *metrics {
	m := &metrics{
		alive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_ring_alive_members",
			Help: "Cluster members this node sees alive, all roles.",
		}),
		shards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_ring_shard_members",
			Help: "Shard members on this node's ownership ring.",
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_ring_changes_total",
			Help: "Membership changes seen, by kind (join, leave, update).",
		}, []string{"kind"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_ring_panics_total",
			Help: "Panics recovered while applying a membership change (the previous owner table stayed in force).",
		}),
	}
	for _, k := range []string{KindJoin, KindLeave, KindUpdate} {
		m.changes.WithLabelValues(k)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.alive, m.shards, m.changes, m.panics}
}

// register registers the metrics on reg (nil: none). They describe one
// Ring, so a registry that already has them is an error: several Rings in
// one process need distinct registerers, for example
// prometheus.WrapRegistererWith(prometheus.Labels{"node": id}, reg).
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for i, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors()[:i] {
				reg.Unregister(done)
			}
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return fmt.Errorf("ring: metrics already registered (another Ring on this registerer?): %w", err)
			}
			return fmt.Errorf("ring: register metrics: %w", err)
		}
	}
	m.reg = reg
	return nil
}

// unregister removes the metrics again, so that a new Ring (a restart in
// the same process, a test) can register its own.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
	m.reg = nil
}
