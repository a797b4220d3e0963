package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	requests     *prometheus.CounterVec
	bids         *prometheus.CounterVec
	bidDuration  *prometheus.HistogramVec
	panics       prometheus.Counter
	authFailures prometheus.Counter
	acceptErrors prometheus.Counter
	// transportErrors counts the requests fasthttp gave up on before any
	// handler ran, by kind (fasthttpLogger).
	transportErrors *prometheus.CounterVec
	// idleReleased counts keep-alive connections closed while idle because
	// the connection cap was near (idleReleaser).
	idleReleased prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "status"}),
		bids: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_bids_total",
			Help: "Bids by outcome: decided (accepted, replayed, too_low, closed, already_leading, max_not_raised, buy_now_unavailable), forwarded to their owner, or refused (key_reused, forbidden, not_found, invalid, rate_limited, overloaded, store_timeout, unavailable, error).",
		}, []string{"outcome"}),
		bidDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bidgate_bid_duration_seconds",
			Help:    "Time to answer a bid, by outcome.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5},
		}, []string{"outcome"}),
		panics: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_http_panics_total",
			Help: "Requests whose handler panicked (answered 500).",
		}),
		authFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_auth_failures_total",
			Help: "Requests refused for a missing, malformed, expired or wrongly signed token.",
		}),
		acceptErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_accept_errors_total",
			Help: "Failed accepts of new connections (out of file descriptors, say) that the server waited out.",
		}),
		transportErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_http_transport_errors_total",
			Help: "Connections the HTTP server gave up on before any handler ran, by kind (malformed_request_line, malformed_header, malformed_body, header_too_large, body_too_large, timeout, connection_reset, tls, connection_limit, accept, other).",
		}, []string{"kind"}),
		idleReleased: f.NewCounter(prometheus.CounterOpts{
			Name: "bidgate_http_idle_connections_released_total",
			Help: "Idle keep-alive connections closed early because open connections neared the cap (--max-conns).",
		}),
	}
	for _, k := range transportKinds {
		m.transportErrors.WithLabelValues(k)
	}
	return m
}

// countSignatureChecks exports what a counts of its signature checks, if it
// counts them: each costs some 85 µs (Ed25519) where a cached token costs
// under 1 µs, and a node pays it once for every token it has not seen.
func countSignatureChecks(reg prometheus.Registerer, a Authenticator) {
	c, ok := a.(signatureCounter)
	if !ok {
		return
	}
	promauto.With(reg).NewCounterFunc(prometheus.CounterOpts{
		Name: "bidgate_token_signature_checks_total",
		Help: "Bearer tokens whose signature was checked, rather than found among the tokens this node verified before.",
	}, func() float64 { return float64(c.SignatureChecks()) })
}

func (m *metrics) countRequest(route string, status int) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}
