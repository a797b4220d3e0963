package fanout

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics are what an operator needs to tell a healthy fan-out from one
// that drops viewers or falls behind.
type metrics struct {
	viewers       prometheus.Gauge
	subscriptions prometheus.Gauge
	// subscriptionsLost counts Redis pub/sub connections lost; their
	// auctions are subscribed again and refreshed.
	subscriptionsLost prometheus.Counter
	messagesSent      prometheus.Counter
	coalesced         prometheus.Counter
	overflows         prometheus.Counter
	slowClosed        prometheus.Counter
	// violations counts viewers closed for sending what a viewer may not
	// (a data frame, control frames past the rate), by reason.
	violations *prometheus.CounterVec
	lag        prometheus.Histogram
	// interval, stretches and schedLatency show the governor at work.
	interval     prometheus.Gauge
	stretches    prometheus.Counter
	schedLatency prometheus.Gauge
}

// newMetrics registers the metrics on reg; nil leaves them unregistered.
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		viewers: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_fanout_viewers",
			Help: "WebSocket viewers connected to this node.",
		}),
		subscriptions: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_fanout_subscriptions",
			Help: "Auction channels this node is subscribed to in Redis.",
		}),
		subscriptionsLost: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_fanout_subscriptions_lost_total",
			Help: "Redis pub/sub connections lost (a primary failed or moved); their auctions were subscribed again and refreshed.",
		}),
		messagesSent: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_fanout_messages_sent_total",
			Help: "Messages written to viewers (snapshots, updates, closed).",
		}),
		coalesced: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_fanout_updates_coalesced_total",
			Help: "Published states never sent on their own: replaced by a newer one within the interval, or older than one already seen.",
		}),
		overflows: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_fanout_queue_overflows_total",
			Help: "Messages that replaced an unsent one in a viewer's send queue.",
		}),
		slowClosed: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_fanout_slow_viewers_closed_total",
			Help: "Viewers closed because they did not keep up (queue overflowing too long, or a write timed out).",
		}),
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_fanout_delivery_lag_seconds",
			Help:    "From the state's creation in the serializing store (its updatedAt) to the end of the write to a viewer.",
			Buckets: []float64{.005, .01, .025, .05, .1, .15, .2, .3, .5, 1, 2.5, 5},
		}),
		interval: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_fanout_interval_seconds",
			Help: "The coalescing interval the node's auctions are flushed at now: --ws-interval, stretched up to --ws-max-interval while the node is overloaded.",
		}),
		stretches: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_fanout_interval_stretches_total",
			Help: "Times the coalescing interval was doubled because the Go scheduler's latency p99 passed --ws-overload-latency: viewers giving way to bids.",
		}),
		schedLatency: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_fanout_sched_latency_p99_seconds",
			Help: "The Go scheduler's latency p99 over the governor's last 250 ms period: how long a runnable goroutine (a bid's included) waited for a CPU.",
		}),
		violations: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_fanout_viewer_violations_total",
			Help: "Viewers closed with 1008 for breaking the receive-only protocol, by reason (data_frame: sent a text or binary message; control_flood: sent pings or pongs faster than the allowed rate).",
		}, []string{"reason"}),
	}
	for _, r := range []string{violationDataFrame, violationControlFlood} {
		m.violations.WithLabelValues(r)
	}
	return m
}

// cacheMetrics say whether the read cache spares the stores, and why it
// reads them.
type cacheMetrics struct {
	hits         prometheus.Counter
	misses       prometheus.Counter
	staleRereads prometheus.Counter
	sharedLoads  prometheus.Counter
	evictions    prometheus.Counter
	updates      prometheus.Counter
	drops        *prometheus.CounterVec
	entries      prometheus.Gauge
}

func newCacheMetrics(reg prometheus.Registerer) *cacheMetrics {
	f := promauto.With(reg)
	return &cacheMetrics{
		hits: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_read_cache_hits_total",
			Help: "Auction reads answered from the node's read cache.",
		}),
		misses: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_read_cache_misses_total",
			Help: "Auction reads of an auction the cache held no state of.",
		}),
		staleRereads: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_read_cache_stale_rereads_total",
			Help: "Auction reads that read the store again: the entry was past --read-cache-max-age or below the minSeq asked for.",
		}),
		sharedLoads: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_read_cache_shared_loads_total",
			Help: "Auction reads that waited for another read's store read of the same auction instead of their own (single flight).",
		}),
		evictions: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_read_cache_evictions_total",
			Help: "Auctions evicted (and unsubscribed) to keep the cache within --read-cache-size.",
		}),
		updates: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_read_cache_updates_total",
			Help: "Published states applied to cached auctions.",
		}),
		drops: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_read_cache_drops_total",
			Help: "Cached states dropped because updates may have been missed, by reason (resubscribed, malformed_update, connection_lost counts connections).",
		}, []string{"reason"}),
		entries: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_read_cache_entries",
			Help: "Auctions in the node's read cache (each one a Redis subscription).",
		}),
	}
}
