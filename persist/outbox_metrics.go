package persist

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type outboxMetrics struct {
	published prometheus.Counter
	delivered prometheus.Counter   // of published, marked without sending
	batch     prometheus.Histogram // rows per pass that published any
	failures  *prometheus.CounterVec
	pending   prometheus.Gauge
	lag       prometheus.Gauge
	leading   prometheus.Gauge
}

func newOutboxMetrics(reg prometheus.Registerer) *outboxMetrics {
	f := promauto.With(reg)
	return &outboxMetrics{
		published: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_outbox_published_total",
			Help: "Outbox rows marked published: sent to Kafka, or delivered already (bidgate_outbox_delivered_total).",
		}),
		delivered: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_outbox_delivered_total",
			Help: "Outbox rows marked published without being sent: notices stored already (the relay's own copy of an outbid came first).",
		}),
		batch: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_outbox_batch_size",
			Help:    "Rows published per pass of the outbox relay (passes that found none are not counted).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8),
		}),
		failures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_outbox_publish_failures_total",
			Help: "Failed outbox relay passes, by cause (kafka, postgres); their rows are sent again.",
		}, []string{"cause"}),
		pending: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_outbox_pending",
			Help: "Unpublished outbox rows, as last seen by an idle relay.",
		}),
		lag: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_outbox_lag_seconds",
			Help: "Age of the oldest unpublished outbox row, as last seen by an idle relay.",
		}),
		leading: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_outbox_leading",
			Help: "1 while this node's relay leads its topic: it listens for every commit of the cluster's rows; the others poll. One per topic in the cluster.",
		}),
	}
}
