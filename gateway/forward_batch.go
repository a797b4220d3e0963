package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
	"github.com/panjf2000/ants/v2"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/ring"
)

// Forwarded bids travel in batches, as hot bids meet Redis: what waits for
// the same owner while its request is busy goes in the next one, with no
// added delay. One request per bid cost a forwarding node a round trip,
// two signatures and a nonce per bid: 31-36 % of its CPU in a flash sale.
// A batch carries each bid as the forwarding node parsed and checked it,
// so the owner decides it without reading the client's request again.
const (
	checkedPath = "/checked-bids" // the batch route of the internal endpoint
	// legacyPath is the batch route of the previous version, which carried
	// each client's body to be read again: still served, for forwarding
	// nodes of that version during an upgrade.
	legacyPath = "/forwarded-bids"
	// forwardInFlight requests per owner at once, the second only for a
	// full batch (batch.Batchers.InFlight). At a flash sale's rates a
	// request's cost is mostly its wake-ups, whatever it carries: 16 lanes
	// per owner with two requests each sent 1.2-2.5 bids a request, one
	// request per owner 6-15.
	forwardInFlight = 2
	// maxForwardBatch bounds the bids of one request.
	maxForwardBatch = 64
)

// forwardTarget is where a bid waits for its batch: an owner's incarnation
// and its address.
type forwardTarget struct {
	name, addr string
}

func targetOf(owner ring.Member) forwardTarget {
	return forwardTarget{name: owner.Name, addr: owner.InternalAddr}
}

// forwardedBid is a bid on its way to its owner: as this node parsed and
// checked it, and the client's request for an owner that reads it again
// (one without the batch route, sent the bid alone).
type forwardedBid struct {
	bid  bidgate.BidRequest
	key  string // the client's Idempotency-Key
	body []byte
}

// checkedBids is the body of POST /checked-bids.
type checkedBids struct {
	Bids []checkedBid `json:"bids"`
}

// checkedBid is one bid of a batch: the bidder the forwarding node
// authenticated, and the request it parsed and checked (parseBid).
type checkedBid struct {
	AuctionID int64         `json:"auctionId"`
	BidderID  int64         `json:"bidderId"`
	RequestID uuid.UUID     `json:"requestId"`
	Amount    bidgate.Money `json:"amount"` // a proxy bid's maximum
	Proxy     bool          `json:"proxy"`
}

func checkedOf(r bidgate.BidRequest) checkedBid {
	return checkedBid{AuctionID: r.AuctionID, BidderID: r.BidderID, RequestID: r.RequestID,
		Amount: bidgate.Money{Decimal: r.Amount, Set: true}, Proxy: r.Proxy}
}

func (c checkedBid) request() bidgate.BidRequest {
	return bidgate.BidRequest{AuctionID: c.AuctionID, BidderID: c.BidderID, RequestID: c.RequestID,
		Amount: c.Amount.Decimal, Proxy: c.Proxy}
}

// legacyBids is the body of POST /forwarded-bids, from a node of the
// previous version: each bid as the client sent it.
type legacyBids struct {
	Bids []legacyBid `json:"bids"`
}

type legacyBid struct {
	AuctionID int64          `json:"auctionId"`
	Subject   string         `json:"subject"`
	Key       string         `json:"idempotencyKey"`
	Body      jsontext.Value `json:"body"`
}

// ownerAnswers is the answer to POST /forwarded-bids: one per bid, in order.
type ownerAnswers struct {
	Answers []ownerAnswer `json:"answers"`
}

// ownerAnswer is what the owner answered to one bid, as the forwarding
// node relays it to the client.
type ownerAnswer struct {
	Status      int            `json:"status"`
	ContentType string         `json:"contentType"`
	RetryAfter  string         `json:"retryAfter,omitempty"`
	Node        string         `json:"node,omitempty"`
	Body        jsontext.Value `json:"body"`
	// err: the bid went alone after its batch was refused, and its own
	// request failed (as sendOne fails).
	err error
}

func answerOf(h *fasthttp.ResponseHeader, status int, body []byte) ownerAnswer {
	return ownerAnswer{Status: status, ContentType: string(h.ContentType()), RetryAfter: string(h.Peek("Retry-After")),
		Node: string(h.Peek(headerNode)), Body: bytes.Clone(body)}
}

// writeTo answers ctx as the owner answered.
func (a ownerAnswer) writeTo(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(a.Status)
	ctx.Response.Header.SetContentType(a.ContentType)
	if a.RetryAfter != "" {
		ctx.Response.Header.Set("Retry-After", a.RetryAfter)
	}
	if a.Node != "" {
		ctx.Response.Header.Set(headerNode, a.Node)
	}
	ctx.SetBody(a.Body)
}

// errBadBatch: the owner's signed answer does not match the batch.
var errBadBatch = errors.New("forwarded bids: the owner's answer does not match the batch")

// sendBatch forwards bids to their owner, to, in one signed request and
// returns its answers in order. Every error concerns the whole batch. A
// lone bid goes to the single route: the batch's envelope would cost more
// than it saves. An owner that answers the batch route with an unsigned
// 404, 405 or 413 (a node of an older version, or a smaller body limit)
// is sent these bids, and all its next ones, one request each, each
// verified on its own.
func (f *forwarder) sendBatch(_ context.Context, to forwardTarget, bids []forwardedBid) ([]ownerAnswer, error) {
	if len(bids) == 1 {
		a, err := f.sendOne(to.addr, bids[0])
		return []ownerAnswer{a}, err
	}
	batch := checkedBids{Bids: make([]checkedBid, len(bids))}
	for i, b := range bids {
		batch.Bids[i] = checkedOf(b.bid)
	}
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("forwarded bids: encode: %w", err)
	}
	start := time.Now()
	resp, signed, err := f.postInternal(to.addr, checkedPath, body)
	f.latency.Observe(time.Since(start).Seconds())
	defer fasthttp.ReleaseResponse(resp)
	if err != nil {
		return nil, err
	}
	if !signed {
		switch resp.StatusCode() {
		case fasthttp.StatusNotFound, fasthttp.StatusMethodNotAllowed, fasthttp.StatusRequestEntityTooLarge:
			if len(resp.Header.Peek(headerAnswerSig)) == 0 {
				f.single.Store(to.name, true)
				return f.sendEach(to.addr, bids), nil
			}
		}
		return nil, errBadAnswer
	}
	var out ownerAnswers
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("%w: status %d", errBadBatch, resp.StatusCode())
	}
	if err := json.Unmarshal(resp.Body(), &out); err != nil || len(out.Answers) != len(bids) {
		return nil, errBadBatch
	}
	return out.Answers, nil
}

// postInternal sends body (JSON) to path on the internal endpoint at
// addr, signed with the cluster secret, and returns the answer and whether
// it is signed for this very request. The caller releases resp.
func (f *forwarder) postInternal(addr, path string, body []byte) (resp *fasthttp.Response, signed bool, err error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp = fasthttp.AcquireResponse()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + addr + path)
	req.Header.SetContentType("application/json")
	req.Header.Set(headerHop, "1")
	req.SetBodyRaw(body)
	reqSig := f.signer.signRequest(req, path, "")
	if err := f.client.Do(req, resp); err != nil {
		return resp, false, err
	}
	return resp, f.signer.verifyAnswer(reqSig, resp), nil
}

// sendEach forwards each of bids in a request of its own, all at once.
func (f *forwarder) sendEach(addr string, bids []forwardedBid) []ownerAnswer {
	answers := make([]ownerAnswer, len(bids))
	var wg sync.WaitGroup
	for i, bid := range bids {
		wg.Go(func() {
			a, err := f.sendOne(addr, bid)
			a.err = err
			answers[i] = a
		})
	}
	wg.Wait()
	return answers
}

// errBatchSize is the internal endpoint's refusal of an empty or oversized batch.
var errBatchSize = refuse(fasthttp.StatusBadRequest, "bad_batch",
	fmt.Sprintf("a batch of forwarded bids holds 1 to %d bids", 4*maxForwardBatch))

// internalCheckedBids serves POST /checked-bids on the internal endpoint
// (signedInternal checked it): each bid is decided as if forwarded alone,
// all at once (the hot ones meet in their auction's batch), and the
// answers go back in one signed answer.
func (s *Server) internalCheckedBids(ctx *fasthttp.RequestCtx) {
	var in checkedBids
	if err := decodeJSON(ctx, &in); err != nil {
		s.writeError(ctx, err)
		return
	}
	s.decideBatch(ctx, len(in.Bids), func(i int) (bidgate.BidRequest, error) { return in.Bids[i].request(), nil })
}

// internalLegacyBids serves POST /forwarded-bids, the batch route of the
// previous version: as internalCheckedBids, each bid read from the
// client's request as the public route reads it.
func (s *Server) internalLegacyBids(ctx *fasthttp.RequestCtx) {
	var in legacyBids
	if err := decodeJSON(ctx, &in); err != nil {
		s.writeError(ctx, err)
		return
	}
	s.decideBatch(ctx, len(in.Bids), func(i int) (bidgate.BidRequest, error) {
		b := in.Bids[i]
		bidder, err := auth.ParseSubject(b.Subject)
		if err != nil {
			return bidgate.BidRequest{}, errBadSubject
		}
		key, err := parseKey([]byte(b.Key))
		if err != nil {
			return bidgate.BidRequest{}, err
		}
		return readBid(b.AuctionID, key, bidder, b.Body)
	})
}

// decideBatch decides the n bids of a batch, bid(i) each, all at once, and
// answers ctx with their answers in order.
func (s *Server) decideBatch(ctx *fasthttp.RequestCtx, n int, bid func(i int) (bidgate.BidRequest, error)) {
	if n == 0 || n > 4*maxForwardBatch {
		s.writeError(ctx, errBatchSize)
		return
	}
	out := ownerAnswers{Answers: make([]ownerAnswer, n)}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		s.deciders.run(func() {
			defer wg.Done()
			out.Answers[i] = s.decideForwarded(bid(i))
		})
	}
	// The first here: this goroutine's stack has grown already.
	out.Answers[0] = s.decideForwarded(bid(0))
	wg.Wait()
	b, err := json.Marshal(out)
	if err != nil {
		s.writeError(ctx, fmt.Errorf("forwarded bids: encode the answers: %w", err))
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyRaw(b)
}

// deciders run the bids of forwarded batches but the first, each on a
// goroutine that outlives it: a goroutine started for every bid grew its
// stack during the decision, as deep as a hot batch's round trip, and that
// was 1.3 % of the three-node cluster's CPU. Idle ones end after a while.
type deciders struct{ pool *ants.Pool }

// deciderIdle is how long a decider waits for the next bid before it ends.
const deciderIdle = 10 * time.Second

func newDeciders() deciders {
	// Unbounded, as goroutines of their own were: the internal endpoint's
	// concurrency and its batches' size bound the bids in flight. A panic
	// is a bug and ends the process, as anywhere else.
	pool, err := ants.NewPool(0, ants.WithExpiryDuration(deciderIdle), ants.WithPanicHandler(func(p any) { panic(p) }))
	if err != nil {
		panic(fmt.Sprintf("forwarded bids: a pool of deciders: %v", err)) // only for invalid options
	}
	return deciders{pool: pool}
}

// run runs decide on a decider, or on a goroutine of its own once the pool
// is released (the server shut down while a batch was arriving).
func (d deciders) run(decide func()) {
	if d.pool.Submit(decide) != nil {
		go decide()
	}
}

// release ends the idle deciders and the pool's own goroutines; a bid still
// being decided finishes on its own.
func (d deciders) release() { d.pool.Release() }

// decideForwarded decides one bid of a batch, r or its refusal err, as
// internalBid decides a bid forwarded alone, and returns its answer. The
// answer is written in a pooled context, of which only the response is
// used: a fresh one is several kilobytes zeroed for every bid.
func (s *Server) decideForwarded(r bidgate.BidRequest, err error) ownerAnswer {
	outcome := "invalid"
	defer s.observeBid(time.Now(), &outcome)
	rc := forwardedCtxs.Get().(*fasthttp.RequestCtx)
	defer func() {
		rc.Response.Reset()
		forwardedCtxs.Put(rc)
	}()
	if err != nil {
		s.writeError(rc, err)
	} else {
		outcome = s.decideBid(rc, r)
	}
	return answerOf(&rc.Response.Header, rc.Response.StatusCode(), rc.Response.Body())
}

// forwardedCtxs hold the answers of forwarded bids, reused: no handler
// keeps one past its answer (a bid's store calls run on a context of
// their own).
var forwardedCtxs = sync.Pool{New: func() any { return new(fasthttp.RequestCtx) }}
