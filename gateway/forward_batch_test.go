package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/internal/testredis"
)

// Bids forwarded at once to the same owner travel together, and each
// client gets the owner's answer to its own bid: 200 bids from 20 clients
// through a node that does not own the auction, each answer checked
// against its request.
func TestForwardedBidsTravelInBatches(t *testing.T) {
	db, _ := testdb.New(t, 16)
	rdb := testredis.Client(t)
	n1 := startNode(t, "n1", db, rdb)
	n2 := startNode(t, "n2", db, rdb, n1.ring.Addr())
	converge(t, 2, n1, n2)
	var id int64
	for id == 0 {
		a := n1.createAuction(with(validAuction(), "hot", true))
		if owner, ok := n1.ring.Owner(a); ok && owner.ID == "n2" {
			id = a
		}
	}
	const clients, each = 20, 10
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				bidder := int64(100*(c+1) + i)
				max := decimal.NewFromInt(100000 + bidder)
				r := n1.bid(bidder, id, uuid.NewString(), map[string]any{"maxAmount": max})
				// Its own answer: accepted with its bidder and maximum, or
				// refused with a minimum above its maximum.
				var ok bool
				switch r.status {
				case 201:
					ok = r.body["bidderId"] == float64(bidder) && r.body["maxAmount"] == max.StringFixed(2)
				case 409:
					minimum, err := decimal.NewFromString(fmt.Sprint(r.body["minimumBid"]))
					ok = err == nil && minimum.GreaterThan(max)
				}
				if !ok {
					t.Errorf("bid by %d up to %s: %d %s: not the answer to this bid", bidder, max, r.status, r.raw)
					return
				}
				if got := r.header.Get(headerNode); got != "n2" {
					t.Errorf("bid by %d decided by %q, want the owner n2", bidder, got)
					return
				}
			}
		})
	}
	wg.Wait()
	bids, batches := testmetrics.Histogram(t, n1.reg, "bidgate_forward_batch_size")
	if bids != clients*each || batches >= bids {
		t.Fatalf("%v bids forwarded in %v requests: want all %d, fewer requests than bids", bids, batches, clients*each)
	}
}

// signedBatch signs batch requests to the internal endpoint, each with a
// nonce of its own.
type signedBatch struct {
	ts     string
	nonces int
}

// header signs body to path with secret.
func (b *signedBatch) header(secret []byte, path, body string) []string {
	b.nonces++
	nonce := fmt.Sprintf("%032x", b.nonces)
	return []string{headerHop, "1", headerTimestamp, b.ts, headerNonce, nonce,
		headerSignature, sign(secret, "POST", path, "", b.ts, nonce, "", []byte(body))}
}

// wantAnswers posts body to path on inner, signed, and checks that the
// signed answer holds the answers want (status, problem code), in order.
func (b *signedBatch) wantAnswers(t *testing.T, inner *testServer, path, body string, want []wantAnswer) {
	t.Helper()
	valid := b.header(clusterSecret, path, body)
	r := inner.do("POST", path, body, valid...)
	if got, want := r.header.Get(headerAnswerSig), sign(clusterSecret, valid[7], "200", []byte(r.raw)); r.status != 200 || got != want {
		t.Fatalf("valid batch: %d %s, answer signature %q, want 200 signed %q", r.status, r.raw, got, want)
	}
	var out ownerAnswers
	if err := json.Unmarshal([]byte(r.raw), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Answers) != len(want) {
		t.Fatalf("%d answers to %d bids: %s", len(out.Answers), len(want), r.raw)
	}
	for i, w := range want {
		a := out.Answers[i]
		var got struct {
			Code     string `json:"code"`
			BidderID int64  `json:"bidderId"`
		}
		if err := json.Unmarshal(a.Body, &got); err != nil {
			t.Fatal(err)
		}
		if a.Status != w.status || got.Code != w.code {
			t.Fatalf("answer %d: %d %s, want %d %q", i, a.Status, a.Body, w.status, w.code)
		}
		if w.status == 201 && (a.Node != "solo" || a.ContentType != "application/json" || got.BidderID != w.bidder) {
			t.Fatalf("answer %d: bidder %d, node %q, content type %q, want bidder %d", i, got.BidderID, a.Node, a.ContentType, w.bidder)
		}
	}
	// The same signed batch again, within the window: refused, once only.
	wantProblem(t, inner.do("POST", path, body, valid...), 401, "bad_signature")
}

// batchOwner starts a node, "solo", whose internal endpoint is sent
// signed batches.
func batchOwner(t *testing.T) (*testNode, *testServer, *signedBatch) {
	db, _ := testdb.New(t, 8)
	n := startNode(t, "solo", db, testredis.Client(t))
	return n, internalOf(t, n), &signedBatch{ts: fmt.Sprint(time.Now().Unix())}
}

type wantAnswer struct {
	status int
	code   string
	bidder int64 // of a 201
}

// The batch route takes only batches signed with the cluster secret, once,
// and decides each bid as the forwarding node checked it, refusing one
// that is not a valid bid in its own answer, each answer in order.
func TestInternalBatchNeedsTheSignature(t *testing.T) {
	n, inner, b := batchOwner(t)
	id, other := n.createAuction(validAuction()), n.createAuction(validAuction())
	bidOn := func(auction, bidder int64, amount string) string {
		return fmt.Sprintf(`{"auctionId":%d,"bidderId":%d,"requestId":%q,"amount":%s,"proxy":false}`, auction, bidder, uuid.NewString(), amount)
	}
	bid := func(bidder int64, amount string) string { return bidOn(id, bidder, amount) }
	batch := func(bids ...string) string { return `{"bids":[` + strings.Join(bids, ",") + `]}` }
	tooMany := make([]string, 4*maxForwardBatch+1)
	for i := range tooMany {
		tooMany[i] = bid(1, `"2000"`)
	}
	one, badAmount := batch(bid(1, `"2000"`)), batch(bid(1, `"2200.001"`))
	cases := []struct {
		name   string
		header []string
		body   string
		status int
		code   string
	}{
		{"no signature", []string{headerHop, "1"}, one, 401, "bad_signature"},
		{"wrong secret", b.header([]byte("other"), checkedPath, one), one, 401, "bad_signature"},
		{"signature of another body", b.header(clusterSecret, checkedPath, batch()), one, 401, "bad_signature"},
		{"signature of another route", b.header(clusterSecret, legacyPath, one), one, 401, "bad_signature"},
		{"user token instead of a signature", as(t, 1, auth.ScopeBid), one, 401, "bad_signature"},
		{"no hop", b.header(clusterSecret, checkedPath, one)[2:], one, 400, "bad_hop"},
		{"empty batch", b.header(clusterSecret, checkedPath, batch()), batch(), 400, "bad_batch"},
		{"too many bids", b.header(clusterSecret, checkedPath, batch(tooMany...)), batch(tooMany...), 400, "bad_batch"},
		{"unknown member", b.header(clusterSecret, checkedPath, `{"bids":[],"x":1}`), `{"bids":[],"x":1}`, 400, "malformed_json"},
		{"a bid with an unknown member", b.header(clusterSecret, checkedPath, batch(`{"auctionId":1,"x":1}`)), batch(`{"auctionId":1,"x":1}`), 400, "malformed_json"},
		{"an amount of three decimals", b.header(clusterSecret, checkedPath, badAmount), badAmount, 400, "malformed_json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, inner.do("POST", checkedPath, c.body, c.header...), c.status, c.code)
		})
	}
	noKey := fmt.Sprintf(`{"auctionId":%d,"bidderId":80,"requestId":%q,"amount":"2400","proxy":false}`, id, uuid.Nil)
	b.wantAnswers(t, inner, checkedPath, batch(bid(77, `"2000"`), bid(0, `"2100"`), bid(78, `"0"`), noKey,
		bidOn(0, 81, `"2300"`), bidOn(other, 79, `"2300"`)),
		[]wantAnswer{{201, "", 77}, {400, "invalid_bidder_id", 0}, {400, "invalid_amount", 0}, {400, "invalid_idempotency_key", 0},
			{400, "invalid_id", 0}, {201, "", 79}})
	if g := n.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["bidCount"] != float64(1) {
		t.Fatalf("auction after the batch: %s, want the one valid bid", g.raw)
	}
}

// A forwarding node of the previous version sends each client's request to
// be read again: its batches are still decided, each bid as the public
// route reads it (the signed subject is the bidder, a body that names
// another is refused).
func TestPreviousVersionBatchesAreDecided(t *testing.T) {
	n, inner, b := batchOwner(t)
	id, other := n.createAuction(validAuction()), n.createAuction(validAuction())
	bidOn := func(auction int64, subject, key, body string) string {
		return fmt.Sprintf(`{"auctionId":%d,"subject":%q,"idempotencyKey":%q,"body":%s}`, auction, subject, key, body)
	}
	bid := func(subject, body string) string { return bidOn(id, subject, uuid.NewString(), body) }
	body := `{"bids":[` + strings.Join([]string{bid("77", `{"amount":2000}`), bid("01", `{"amount":2100}`),
		bid("1", `{"bidderId":2,"amount":2200}`), bid("78", `{"amount":"x"}`), bidOn(id, "80", "not-a-key", `{"amount":2400}`),
		bidOn(other, "79", uuid.NewString(), `{"amount":2300}`)}, ",") + `]}`
	b.wantAnswers(t, inner, legacyPath, body, []wantAnswer{{201, "", 77}, {400, "bad_subject", 0}, {403, "subject_mismatch", 0},
		{400, "invalid_amount", 0}, {400, "invalid_idempotency_key", 0}, {201, "", 79}})
}

// A node of an older version has no batch route: a batch it refuses goes
// one request per bid, each verified, and so do its next bids; it stays on
// the ring.
func TestOwnerWithoutBatchesGetsSingleBids(t *testing.T) {
	owner := newSigner(clusterSecret, nil)
	paths := make(chan string, 10)
	addr, requests := fakeOwner(t, func(ctx *fasthttp.RequestCtx) {
		paths <- string(ctx.Path())
		if string(ctx.Path()) == checkedPath {
			ctx.SetStatusCode(404)
			ctx.SetContentType("application/problem+json")
			ctx.SetBodyString(`{"type":"about:blank","title":"Not Found","status":404,"code":"route_not_found","detail":"no such route"}`)
			return
		}
		if err := owner.verifyRequest(ctx); err != nil {
			t.Errorf("single bid: %v", err)
		}
		ctx.SetStatusCode(201)
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set(headerNode, "old")
		ctx.SetBodyString(`{"bidderId":` + string(ctx.Request.Header.Peek(headerSubject)) + `}`)
		owner.signAnswer(string(ctx.Request.Header.Peek(headerSignature)), &ctx.Response)
	})
	cluster := stubCluster{owner: shardMember("old", addr, true), self: shardMember("new", "", true), rejected: make(chan string, 1)}
	f := newForwarder(cluster, newSigner(clusterSecret, nil), 2*time.Second, prometheus.NewRegistry())
	bids := []forwardedBid{
		{bid: bidgate.BidRequest{AuctionID: 7, BidderID: 41, RequestID: uuid.New(), Amount: decimal.NewFromInt(2000)},
			key: uuid.NewString(), body: []byte(`{"amount":2000}`)},
		{bid: bidgate.BidRequest{AuctionID: 7, BidderID: 42, RequestID: uuid.New(), Amount: decimal.NewFromInt(2100)},
			key: uuid.NewString(), body: []byte(`{"amount":2100}`)},
	}
	answers, err := f.sendBatch(context.Background(), targetOf(cluster.owner), bids)
	if err != nil || len(answers) != 2 {
		t.Fatalf("batch to an older owner: %d answers, %v", len(answers), err)
	}
	for i, a := range answers {
		if want := fmt.Sprintf(`{"bidderId":%d}`, bids[i].bid.BidderID); a.err != nil || a.Status != 201 || a.Node != "old" || string(a.Body) != want {
			t.Fatalf("bid %d: %d %s from %q (%v), want 201 %s from the older owner", i, a.Status, a.Body, a.Node, a.err, want)
		}
	}
	if n := requests.Load(); n != 3 {
		t.Fatalf("the older owner got %d requests, want 3 (the batch, refused, then each bid)", n)
	}
	if got := <-paths; got != checkedPath {
		t.Fatalf("first request to %s, want the batch route", got)
	}
	for range 2 {
		if got := <-paths; got != "/auctions/7/bids" {
			t.Fatalf("a bid sent alone to %s", got)
		}
	}
	if _, single := f.single.Load("old"); !single {
		t.Fatal("the older owner is not remembered: its next batches would be refused again")
	}
	if len(cluster.rejected) != 0 {
		t.Fatal("an owner without the batch route was rejected from the ring")
	}
}
