package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

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
	headerNode      = "X-Bidgate-Node"    // the node that decided the bid
)

// signatureWindow bounds how old a signed request may be. It is a node
// clock, used only to limit replays of captured internal requests.
const signatureWindow = time.Minute

// forwarder sends bids to the node that owns their auction, over pooled
// keep-alive connections. Correctness never depends on it: two nodes that
// both think they own an auction are still right, because PostgreSQL and
// Redis serialize; owning buys cache locality and batching.
type forwarder struct {
	cluster Cluster
	secret  []byte
	client  *fasthttp.Client

	forwarded *prometheus.CounterVec
	latency   prometheus.Histogram
}

func newForwarder(cluster Cluster, secret []byte, timeout time.Duration, reg prometheus.Registerer) *forwarder {
	f := &forwarder{
		cluster: cluster,
		secret:  secret,
		client: &fasthttp.Client{
			Name:                "bidgate-forwarder",
			MaxConnsPerHost:     1024,
			ReadTimeout:         timeout,
			WriteTimeout:        timeout,
			MaxIdleConnDuration: time.Minute,
			RetryIfErr:          func(*fasthttp.Request, int, error) (bool, bool) { return false, false }, // we choose the next owner ourselves
		},
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_forwarded_total",
			Help: "Bids forwarded to their owner, by result (ok, next_owner, failed).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_forward_duration_seconds",
			Help:    "Round trip of a forwarded bid to its owner.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1},
		}),
	}
	reg.MustRegister(f.forwarded, f.latency)
	return f
}

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
	writeProblem(ctx, newProblem(fasthttp.StatusServiceUnavailable, "owner_unavailable",
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
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	subject := strconv.FormatInt(bidder, 10)
	req.Header.Set(headerHop, "1")
	req.Header.Set(headerTimestamp, ts)
	req.Header.Set(headerSubject, subject)
	req.Header.Set(headerSignature, sign(f.secret, string(ctx.Method()), string(ctx.Path()), string(key), ts, subject, ctx.PostBody()))

	start := time.Now()
	err := f.client.Do(req, resp)
	f.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		return err
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

// sign is the HMAC-SHA256, under the cluster secret, of everything a
// forwarded bid carries.
func sign(secret []byte, method, path, key, ts, subject string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	for _, part := range []string{method, path, key, ts, subject} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// verify checks a forwarded request's signature and age.
func verify(secret []byte, ctx *fasthttp.RequestCtx) bool {
	ts := string(ctx.Request.Header.Peek(headerTimestamp))
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(secret) == 0 {
		return false
	}
	if age := time.Since(time.Unix(sec, 0)); age > signatureWindow || age < -signatureWindow {
		return false
	}
	want := sign(secret, string(ctx.Method()), string(ctx.Path()),
		string(ctx.Request.Header.Peek("Idempotency-Key")), ts, string(ctx.Request.Header.Peek(headerSubject)), ctx.PostBody())
	return hmac.Equal([]byte(want), ctx.Request.Header.Peek(headerSignature))
}
