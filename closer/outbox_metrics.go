package closer

import "github.com/prometheus/client_golang/prometheus"

type outboxMetrics struct {
	published prometheus.Counter
	failures  *prometheus.CounterVec
	pending   prometheus.Gauge
	lag       prometheus.Gauge
}

func newOutboxMetrics(reg prometheus.Registerer) *outboxMetrics {
	return &outboxMetrics{
		published: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_outbox_published_total",
			Help: "Outbox rows published to Kafka and marked published.",
		})),
		failures: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_outbox_publish_failures_total",
			Help: "Failed outbox relay passes, by cause (kafka, postgres); their rows are sent again.",
		}, []string{"cause"})),
		pending: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_outbox_pending",
			Help: "Unpublished outbox rows, as last seen by an idle relay.",
		})),
		lag: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_outbox_lag_seconds",
			Help: "Age of the oldest unpublished outbox row, as last seen by an idle relay.",
		})),
	}
}
