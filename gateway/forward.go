package gateway

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/valyala/fasthttp"

	"bidgate/internal/problem"
	"bidgate/ring"
)

// Cluster is what the gateway needs from the ring. A nil Cluster means a
// single node: everything is served locally.
type Cluster interface {
	Owners(auctionID int64, n int) []ring.Member
	Self() ring.Member
	Members() []ring.Member
}

// Headers of a forwarded request and of every bid answer.
const (
	headerHop       = "X-Bidgate-Hop"
	headerTimestamp = "X-Bidgate-Timestamp"
	headerSignature = "X-Bidgate-Signature"
	headerSubject   = "X-Bidgate-Subject" // the bidder, as the forwarding node authenticated them
	headerNonce     = "X-Bidgate-Nonce"   // makes each forwarded request unique, accepted once
	headerAnswerSig = "X-Bidgate-Answer-Signature"
	headerNode      = "X-Bidgate-Node" // the node that decided the bid
)

// forwarder sends bids to the node that owns their auction, over pooled
// keep-alive connections. Correctness never depends on it: two nodes that
// both think they own an auction are still right, because PostgreSQL and
// Redis serialize; owning buys cache locality and batching.
type forwarder struct {
	cluster Cluster
	signer  *signer
	client  *fasthttp.Client

	forwarded *prometheus.CounterVec
	latency   prometheus.Histogram
}

func newForwarder(cluster Cluster, signer *signer, timeout time.Duration, reg prometheus.Registerer) *forwarder {
	metric := promauto.With(reg)
	return &forwarder{
		cluster: cluster,
		signer:  signer,
		client: &fasthttp.Client{
			Name:                "bidgate-forwarder",
			MaxConnsPerHost:     1024,
			ReadTimeout:         timeout,
			WriteTimeout:        timeout,
			MaxIdleConnDuration: time.Minute,
			RetryIfErr:          func(*fasthttp.Request, int, error) (bool, bool) { return false, false }, // we choose the next owner ourselves
		},
		forwarded: metric.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_forwarded_total",
			Help: "Bids forwarded to their owner, by result (ok, next_owner, failed).",
		}, []string{"result"}),
		latency: metric.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_forward_duration_seconds",
			Help:    "Round trip of a forwarded bid to its owner.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1},
		}),
	}
}

// errBadAnswer: the owner's answer does not carry a valid signature.
var errBadAnswer = errors.New("forwarded bid: the answer is not signed with the cluster secret")

// forward sends the bid to its owner when that is another node and copies
// the owner's answer into ctx. It returns false when this node should serve
// the bid itself: it owns the auction, or the owner is unreachable and this
// node is next in line. When neither owner answers it writes a 503.
func (f *forwarder) forward(ctx *fasthttp.RequestCtx, auctionID, bidder int64) bool {
	self := f.cluster.Self().Name
	owners := f.cluster.Owners(auctionID, 2)
	if len(owners) == 0 {
		return false // no shard in view yet: serve here rather than fail
	}
	for i, m := range owners {
		if m.Name == self {
			return false
		}
		if err := f.send(ctx, m, bidder); err == nil {
			if i > 0 {
				f.forwarded.WithLabelValues("next_owner").Inc()
			} else {
				f.forwarded.WithLabelValues("ok").Inc()
			}
			return true
		}
	}
	f.forwarded.WithLabelValues("failed").Inc()
	problem.Write(ctx, problem.New(fasthttp.StatusServiceUnavailable, "owner_unavailable",
		"the node that owns this auction cannot be reached; retry with the same Idempotency-Key"))
	return true
}

func (f *forwarder) send(ctx *fasthttp.RequestCtx, to ring.Member, bidder int64) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethodBytes(ctx.Method())
	req.SetRequestURI("http://" + to.InternalAddr + string(ctx.Path()))
	req.Header.SetContentType("application/json")
	key := ctx.Request.Header.Peek("Idempotency-Key")
	req.Header.SetBytesV("Idempotency-Key", key)
	req.SetBody(ctx.PostBody())
	subject := strconv.FormatInt(bidder, 10)
	req.Header.Set(headerHop, "1")
	reqSig := f.signer.signRequest(req, subject)
	start := time.Now()
	err := f.client.Do(req, resp)
	f.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	// An answer the owner did not sign for this very request (a process
	// that is not a member, a replayed answer) counts as no answer.
	if !f.signer.verifyAnswer(reqSig, resp) {
		return errBadAnswer
	}
	ctx.SetStatusCode(resp.StatusCode())
	ctx.Response.Header.SetContentTypeBytes(resp.Header.ContentType())
	for _, h := range []string{"Retry-After", headerNode} {
		if v := resp.Header.Peek(h); len(v) > 0 {
			ctx.Response.Header.SetBytesV(h, v)
		}
	}
	ctx.SetBody(resp.Body())
	return nil
}
