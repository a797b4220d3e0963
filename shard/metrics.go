package shard

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	batchSize       prometheus.Histogram
	coldGroupSize   prometheus.Histogram
	scriptDuration  prometheus.Histogram
	earlyRejects    prometheus.Counter
	rateLimited     prometheus.Counter
	overloaded      prometheus.Counter
	promotions      *prometheus.CounterVec
	publishFailures prometheus.Counter
	// listOverlayFailures counts list pages whose hot auctions were shown
	// as of the database because Redis did not answer.
	listOverlayFailures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		batchSize: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_hot_batch_size",
			Help:    "Bids decided per round trip of Redis script calls on the hot path (one call per auction in it).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		coldGroupSize: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_cold_group_size",
			Help:    "Bids of one cold auction decided per PostgreSQL transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32},
		}),
		scriptDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_hot_script_duration_seconds",
			Help:    "Latency of one round trip of hot-path script calls.",
			Buckets: []float64{.0001, .0002, .0005, .001, .002, .005, .01, .02, .05, .1},
		}),
		earlyRejects: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_early_rejects_total",
			Help: "Cold bids refused from the node's price cache without the serializing store.",
		}),
		rateLimited: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_rate_limited_total",
			Help: "Bids refused by the per-bidder token bucket.",
		}),
		overloaded: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_hot_queue_full_total",
			Help: "Bids refused with 503 because their auction's queue was full.",
		}),
		promotions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_promotions_total",
			Help: "Cold auctions moved to the hot path, by trigger (operator, auto).",
		}, []string{"trigger"}),
		publishFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_publish_failures_total",
			Help: "State updates that could not be published to Redis.",
		}),
		listOverlayFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_list_live_state_failures_total",
			Help: "Auction list pages whose hot auctions were shown as of the database because their live state could not be read from Redis.",
		}),
	}
	return m
}
