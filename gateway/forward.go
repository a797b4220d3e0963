package gateway

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/batch"
	"bidgate/ring"
)

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
	batches *batch.Batchers[forwardTarget, forwardedBid, ownerAnswer]
	single  sync.Map // names of owners without the batch route (an older version): sent one bid a request

	forwarded *prometheus.CounterVec
	latency   prometheus.Histogram
}

func newForwarder(cluster Cluster, signer *signer, timeout time.Duration, reg prometheus.Registerer) *forwarder {
	metric := promauto.With(reg)
	f := &forwarder{
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
			Help: "Bids forwarded to their owner, by result (ok, next_owner, owner_slow, failed).",
		}, []string{"result"}),
		latency: metric.NewHistogram(prometheus.HistogramOpts{
			Name:    "bidgate_forward_duration_seconds",
			Help:    "Round trip of a request of forwarded bids to their owner.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1},
		}),
	}
	batchSize := metric.NewHistogram(prometheus.HistogramOpts{
		Name:    "bidgate_forward_batch_size",
		Help:    "Bids per request forwarded to an owner.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 7),
	})
	f.batches = batch.New(maxForwardBatch, 4096, 10*time.Second, f.sendBatch)
	f.batches.Timeout = timeout + time.Second // the client's own timeouts end the call first
	f.batches.InFlight = forwardInFlight
	f.batches.Observe = func(n int) { batchSize.Observe(float64(n)) }
	return f
}

var (
	// errBadAnswer: the owner's answer does not carry a valid signature.
	errBadAnswer = errors.New("forwarded bid: the answer is not signed with the cluster secret")
	// errOwnerUnavailable: neither the owner nor the next in line took the
	// bid (no connection, or the connection dropped).
	errOwnerUnavailable = refuse(fasthttp.StatusServiceUnavailable, "owner_unavailable",
		"the node that owns this auction cannot be reached; retry with the same Idempotency-Key")
	// errOwnerSlow: the owner took the bid but did not answer in time. It
	// may have decided it, or still be deciding: a retry with the same key
	// gets that outcome, never a second bid.
	errOwnerSlow = refuse(fasthttp.StatusServiceUnavailable, "owner_slow",
		"the node that owns this auction received the bid but did not answer in time; the bid may have been decided: retry with the same Idempotency-Key to get its outcome")
)

// forward sends the bid to its owner when that is another node and copies
// the owner's answer into ctx. It reports whether the bid was forwarded:
// not when this node should serve it itself (it owns the auction, or the
// owner is unreachable and this node is next in line). A bid that no owner
// answered was forwarded all the same, with errOwnerUnavailable or
// errOwnerSlow: this node does not decide it.
//
// The owners are tried in ring order, and only members that proved the
// cluster secret are sent anything (the ring admits no other, this is the
// second lock). An owner whose answer does not verify is rejected from the
// ring at once, so the next bids do not go to it, and the next owner is
// tried. An owner that is gone (no connection, connection dropped) is
// passed over for the next; one that took the bid and is slow is not: the
// next owner would wait on the same stores, and the client is told the bid
// may be decided.
func (f *forwarder) forward(ctx *fasthttp.RequestCtx, r bidgate.BidRequest) (bool, error) {
	self := f.cluster.Self().Name
	owners := f.cluster.Owners(r.AuctionID, 2)
	if len(owners) == 0 {
		return false, nil // no shard in view yet: serve here rather than fail
	}
	for i, m := range owners {
		if m.Name == self {
			return false, nil
		}
		if !m.Verified {
			continue
		}
		answer, err := f.send(ctx, m, r)
		switch {
		case err == nil:
			answer.writeTo(ctx)
			if i > 0 {
				f.forwarded.WithLabelValues("next_owner").Inc()
			} else {
				f.forwarded.WithLabelValues("ok").Inc()
			}
			return true, nil
		case errors.Is(err, errBadAnswer):
			f.cluster.Reject(m.Name, "its answer to a forwarded bid is not signed with the cluster secret")
		case slow(err):
			f.forwarded.WithLabelValues("owner_slow").Inc()
			return true, errOwnerSlow
		case errors.Is(err, bidgate.ErrOverloaded):
			return true, err // this node's queue to the owner is full
		}
	}
	f.forwarded.WithLabelValues("failed").Inc()
	return true, errOwnerUnavailable
}

// slow reports whether err says the owner took the request and did not
// answer in time, as opposed to a connection that could not be made (the
// request never left) or was dropped.
func slow(err error) bool {
	var op *net.OpError
	if errors.Is(err, fasthttp.ErrDialTimeout) || errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var timeout interface{ Timeout() bool }
	return errors.Is(err, fasthttp.ErrTimeout) || errors.As(err, &timeout) && timeout.Timeout()
}

// send has the owner to decide r, the bid of ctx. Bids travel in batches
// (forward_batch.go); an owner that does not take batches is sent each
// bid in a request of its own.
func (f *forwarder) send(ctx *fasthttp.RequestCtx, to ring.Member, r bidgate.BidRequest) (ownerAnswer, error) {
	// The body is read before Do returns: Do waits for the bid's answer.
	bid := forwardedBid{bid: r, key: string(ctx.Request.Header.Peek("Idempotency-Key")), body: ctx.PostBody()}
	if _, single := f.single.Load(to.Name); single {
		return f.sendOne(to.InternalAddr, bid)
	}
	answer, err := f.batches.Do(context.Background(), targetOf(to), bid)
	if err == nil {
		err = answer.err
	}
	return answer, err
}

// sendOne forwards bid to the owner at addr in a request of its own, to
// POST /auctions/{id}/bids as the client sent it.
func (f *forwarder) sendOne(addr string, bid forwardedBid) (ownerAnswer, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	path := "/auctions/" + strconv.FormatInt(bid.bid.AuctionID, 10) + "/bids"
	req.SetRequestURI("http://" + addr + path)
	req.Header.SetContentType("application/json")
	req.Header.Set("Idempotency-Key", bid.key)
	req.SetBody(bid.body)
	req.Header.Set(headerHop, "1")
	reqSig := f.signer.signRequest(req, path, strconv.FormatInt(bid.bid.BidderID, 10))
	start := time.Now()
	err := f.client.Do(req, resp)
	f.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		return ownerAnswer{}, err
	}
	// An answer the owner did not sign for this very request (a process
	// that is not a member, a replayed answer) counts as no answer.
	if !f.signer.verifyAnswer(reqSig, resp) {
		return ownerAnswer{}, errBadAnswer
	}
	return answerOf(&resp.Header, resp.StatusCode(), resp.Body()), nil
}

// forwardedKey marks a request that came through the internal endpoint:
// it is served here, whatever this node's view of the ring (one hop at most).
const forwardedKey = "bidgate.forwarded"

// The internal endpoint's refusals of a request that is not a forwarded bid.
var (
	errBadHop     = refuse(fasthttp.StatusBadRequest, "bad_hop", "a forwarded bid carries X-Bidgate-Hop: 1")
	errBadSubject = refuse(fasthttp.StatusBadRequest, "bad_subject", "a forwarded bid carries its bidder in "+headerSubject)
)

// signedInternal serves next on the internal endpoint only for a request
// signed with the cluster secret, once, within the window, and one hop
// away; whatever the answer, it is signed for this request.
func (s *Server) signedInternal(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if err := s.signer.verifyRequest(ctx); err != nil {
			s.writeError(ctx, refuse(fasthttp.StatusUnauthorized, "bad_signature", "internal request "+err.Error()))
			return
		}
		defer s.signer.signAnswer(string(ctx.Request.Header.Peek(headerSignature)), &ctx.Response)
		if hop, _ := strconv.Atoi(string(ctx.Request.Header.Peek(headerHop))); hop != 1 {
			s.writeError(ctx, errBadHop)
			return
		}
		next(ctx)
	}
}

// internalBid serves POST /auctions/{id}/bids on the internal endpoint: a
// bid forwarded alone (signedInternal checked it).
func (s *Server) internalBid(ctx *fasthttp.RequestCtx) {
	// The forwarding node verified the bidder's token and signed the
	// subject into the request.
	bidder, err := auth.ParseSubject(string(ctx.Request.Header.Peek(headerSubject)))
	if err != nil {
		s.writeError(ctx, errBadSubject)
		return
	}
	ctx.SetUserValue(forwardedKey, true)
	s.placeBid(ctx, bidder)
}
