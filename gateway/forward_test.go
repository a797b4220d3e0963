package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
	"bidgate/ring"
	"bidgate/shard"
)

// stubCluster names a fixed owner, then this node, and records the members
// the forwarder rejects.
type stubCluster struct {
	owner, self ring.Member
	rejected    chan string // names passed to Reject; nil: not recorded
}

func (c stubCluster) Owners(int64, int) []ring.Member { return []ring.Member{c.owner, c.self} }
func (c stubCluster) Self() ring.Member               { return c.self }
func (c stubCluster) Members() []ring.Member          { return []ring.Member{c.owner, c.self} }
func (c stubCluster) Reject(name, _ string) {
	select {
	case c.rejected <- name:
	default:
	}
}

// fakeOwner serves handler on a loopback port until the test ends and
// counts the requests it got.
func fakeOwner(t *testing.T, handler fasthttp.RequestHandler) (addr string, requests *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	requests = &atomic.Int64{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		requests.Add(1)
		handler(ctx)
	}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shut the fake owner down: %v", err)
		}
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) { // in case Serve had not begun
			t.Errorf("close the fake owner's listener: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("fake owner: %v", err)
		}
	})
	return ln.Addr().String(), requests
}

// rogueAnswer answers every bid 201 with a signature that is not one.
func rogueAnswer(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(201)
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set(headerAnswerSig, "00")
	ctx.SetBodyString(`{"amount":"FAKE","bidderId":42,"seq":1}`)
}

func shardMember(name, addr string, verified bool) ring.Member {
	return ring.Member{Name: name, ID: name, InternalAddr: addr, Roles: []string{ring.RoleShard}, State: ring.StateAlive, Verified: verified}
}

// A process that poses as an auction's owner (it answers on the internal
// address a member advertises, but does not hold the cluster secret) is
// never believed: its answer carries no valid signature, so the forwarding
// node rejects it from its ring and decides the bid itself, at once.
func TestForwardedAnswerMustBeSigned(t *testing.T) {
	addr, _ := fakeOwner(t, rogueAnswer)
	cluster := stubCluster{owner: shardMember("rogue", addr, true), self: shardMember("honest", "", true), rejected: make(chan string, 1)}
	s, _ := startGateway(t, Config{NodeID: "honest", Cluster: cluster, ClusterSecret: clusterSecret},
		shard.Config{RateLimit: -1, PromoteRate: -1})
	id := s.createAuction(validAuction())
	r := s.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 2000},
		append([]string{"Idempotency-Key", uuid.NewString()}, as(t, 42, auth.ScopeBid)...)...)
	if r.status != 201 || r.body["amount"] != "2000.00" || r.header.Get(headerNode) != "honest" {
		t.Fatalf("bid forwarded to a rogue owner: %d %s (node %q), want 201 decided by this node", r.status, r.raw, r.header.Get(headerNode))
	}
	if m := s.admin().do("GET", "/metrics", nil).raw; strings.Contains(m, `bidgate_forwarded_total{result="ok"}`) {
		t.Fatal("the rogue's answer was counted as a forward")
	}
	select {
	case name := <-cluster.rejected:
		if name != "rogue" {
			t.Fatalf("rejected %q, want the rogue", name)
		}
	default:
		t.Fatal("the member whose answer did not verify was not rejected from the ring")
	}
}

// A member that has not proved the cluster secret is never sent a bid's
// body, even when a ring names it as the owner.
func TestUnverifiedOwnerIsSentNothing(t *testing.T) {
	addr, requests := fakeOwner(t, rogueAnswer)
	cluster := stubCluster{owner: shardMember("unproven", addr, false), self: shardMember("honest", "", true)}
	s, _ := startGateway(t, Config{NodeID: "honest", Cluster: cluster, ClusterSecret: clusterSecret},
		shard.Config{RateLimit: -1, PromoteRate: -1})
	id := s.createAuction(validAuction())
	r := s.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 2000},
		append([]string{"Idempotency-Key", uuid.NewString()}, as(t, 42, auth.ScopeBid)...)...)
	if r.status != 201 || r.header.Get(headerNode) != "honest" {
		t.Fatalf("bid: %d %s (node %q), want 201 decided by this node", r.status, r.raw, r.header.Get(headerNode))
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the unproven member got %d requests", n)
	}
}

// An owner that took the bid and does not answer in time may decide it
// still: the client is told so (owner_slow, 503 with Retry-After), and the
// bid is not decided a second time by the next node in line.
func TestSlowOwnerIsNotPassedOver(t *testing.T) {
	release := make(chan struct{})
	addr, requests := fakeOwner(t, func(ctx *fasthttp.RequestCtx) {
		<-release
		rogueAnswer(ctx)
	})
	t.Cleanup(func() { close(release) }) // before the fake owner shuts down (cleanups run last first)
	cluster := stubCluster{owner: shardMember("slow", addr, true), self: shardMember("honest", "", true), rejected: make(chan string, 1)}
	s, _ := startGateway(t, Config{NodeID: "honest", Cluster: cluster, ClusterSecret: clusterSecret, ForwardTimeout: 300 * time.Millisecond},
		shard.Config{RateLimit: -1, PromoteRate: -1})
	id := s.createAuction(validAuction())
	r := s.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 2000},
		append([]string{"Idempotency-Key", uuid.NewString()}, as(t, 42, auth.ScopeBid)...)...)
	wantProblem(t, r, 503, "owner_slow")
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.body["detail"].(string), "same Idempotency-Key") {
		t.Fatalf("owner_slow answer %s (Retry-After %q): want a Retry-After and the retry advice", r.raw, r.header.Get("Retry-After"))
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the slow owner got %d requests, want 1", n)
	}
	if len(cluster.rejected) != 0 {
		t.Fatal("a slow owner was rejected from the ring")
	}
	if m := s.admin().do("GET", "/metrics", nil).raw; !strings.Contains(m, `bidgate_forwarded_total{result="owner_slow"} 1`) {
		t.Fatal("the slow owner is not counted")
	}
}

// During a rotation of the cluster secret a node signs with its
// --cluster-secret and accepts --cluster-secret-previous too, so nodes at
// either step of the roll verify each other; a node with only the other
// secret does not.
func TestSignerAcceptsThePreviousSecret(t *testing.T) {
	oldS, newS := []byte("the old cluster secret"), []byte("the new cluster secret")
	cases := []struct {
		name     string
		from, to *signer
		ok       bool
	}{
		{"same secret", newSigner(oldS, nil), newSigner(oldS, nil), true},
		{"step 1: old signs, the receiver accepts the new too", newSigner(oldS, nil), newSigner(oldS, newS), true},
		{"step 2: new signs, the receiver still signs old", newSigner(newS, oldS), newSigner(oldS, newS), true},
		{"step 2: old signs, the receiver signs new", newSigner(oldS, newS), newSigner(newS, oldS), true},
		{"step 3: new signs, the receiver dropped old", newSigner(newS, oldS), newSigner(newS, nil), true},
		{"stale: old signs after the rotation", newSigner(oldS, nil), newSigner(newS, nil), false},
		{"wrong secret", newSigner([]byte("a wrong cluster secret"), nil), newSigner(newS, oldS), false},
		{"no secret", newSigner(nil, nil), newSigner(nil, nil), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://owner/auctions/1/bids")
			req.SetBodyString(`{"amount":"10"}`)
			sig := c.from.signRequest(req, "/auctions/1/bids", "42")
			var ctx fasthttp.RequestCtx
			req.CopyTo(&ctx.Request)
			if err := c.to.verifyRequest(&ctx); (err == nil) != c.ok {
				t.Fatalf("request: %v, want accepted %v", err, c.ok)
			}
			// The answer goes the other way.
			ctx.SetStatusCode(201)
			ctx.SetBodyString(`{"amount":"10.00"}`)
			c.to.signAnswer(sig, &ctx.Response)
			if got := c.from.verifyAnswer(sig, &ctx.Response); got != c.ok {
				t.Fatalf("answer verified %v, want %v", got, c.ok)
			}
		})
	}
}

// BenchmarkSignedExchange is the signing of one forwarded request and its
// answer, both ways: what a forwarded bid costs the two nodes beyond HTTP.
func BenchmarkSignedExchange(b *testing.B) {
	from, to := newSigner([]byte("the cluster secret"), nil), newSigner([]byte("the cluster secret"), nil)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	var ctx fasthttp.RequestCtx
	for b.Loop() {
		req.Reset()
		req.Header.SetMethod("POST")
		req.SetRequestURI("http://owner/auctions/1/bids")
		req.Header.Set("Idempotency-Key", "9b2f4c1e-5d7a-4e8b-a3c6-0f1e2d3c4b5a")
		req.SetBodyString(`{"amount":"10.00"}`)
		sig := from.signRequest(req, "/auctions/1/bids", "42")
		ctx.Request.Reset()
		req.CopyTo(&ctx.Request)
		if err := to.verifyRequest(&ctx); err != nil {
			b.Fatal(err)
		}
		ctx.Response.Reset()
		ctx.SetStatusCode(201)
		ctx.SetBodyString(`{"amount":"10.00"}`)
		to.signAnswer(sig, &ctx.Response)
		if !from.verifyAnswer(sig, &ctx.Response) {
			b.Fatal("the answer does not verify")
		}
	}
}

// sign is the wire format of a signature, written out apart from the
// signer's own: the hex HMAC-SHA256, under secret, of the string parts
// each ended by a newline, then the body ([]byte, last).
func sign(secret []byte, parts ...any) string {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			m.Write([]byte(v))
			m.Write([]byte{'\n'})
		case []byte:
			m.Write(v)
		}
	}
	return hex.EncodeToString(m.Sum(nil))
}
