package closer

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	closed     *prometheus.CounterVec
	passes     prometheus.Counter
	duration   prometheus.Histogram
	extensions prometheus.Counter
	errors     *prometheus.CounterVec

	notices          *prometheus.CounterVec
	leftNotices      prometheus.Counter
	waiting          prometheus.Gauge
	persistedAtClose prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		closed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_closer_auctions_closed_total",
			Help: "Auctions the closer settled, by mode (cold, hot).",
		}, []string{"mode"}),
		passes: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_closer_passes_total",
			Help: "Close passes run (each looks for due work, then runs a cold batch, a hot batch and the left notices where due).",
		}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_closer_pass_duration_seconds",
			Help:    "Duration of one close pass.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2},
		}),
		extensions: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_closer_extensions_total",
			Help: "Hot auctions due by PostgreSQL whose end Redis had moved later.",
		}),
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_closer_errors_total",
			Help: "Failed close batches, by stage (due: the look for due work; cold, hot, announce, notices).",
		}, []string{"stage"}),
		notices: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_closer_notices_stored_total",
			Help: "Close notices (won, lost, sold, unsold) the closer stored for their users right after the close, by type.",
		}, []string{"type"}),
		leftNotices: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_closer_left_notices_total",
			Help: "Closes whose notices a pass told after NoticeGrace because the closer that closed them did not (it died, or PostgreSQL failed).",
		}),
		waiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "bidgate_closer_unsettled_hot_auctions",
			Help: "Hot auctions ended in Redis that the last pass could not settle because bids were missing from PostgreSQL (alert when above 0 for long).",
		}),
		persistedAtClose: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_closer_persisted_bids_total",
			Help: "Hot bids the closer wrote to PostgreSQL from the Redis log before settling (Kafka had not delivered them).",
		}),
	}
}
