package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/internal/testredis"
	"bidgate/ring"
)

// A token one node verified for a bid is told to the other, which takes
// the next bid with it without checking its signature, and still checks it
// on any other route.
func TestTokensVerifiedOnOneNodeAreToldToTheOthers(t *testing.T) {
	db, _ := testdb.New(t, 16)
	rdb := testredis.Client(t)
	n1 := startNode(t, "n1", db, rdb)
	n2 := startNode(t, "n2", db, rdb, n1.ring.Addr())
	converge(t, 2, n1, n2)
	tok := mint(t, signingKey(t), auth.Token{Subject: 9301, Scopes: []string{auth.ScopeBid}})
	bid := func(n *testNode) {
		t.Helper()
		id := n1.createAuction(validAuction())
		r := n.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 1010},
			"Idempotency-Key", uuid.NewString(), "Authorization", "Bearer "+tok)
		if r.status != 201 {
			t.Fatalf("bid through %s: %d %s", n.id, r.status, r.raw)
		}
	}
	checks := func(n *testNode) float64 {
		t.Helper()
		return testmetrics.Value(t, n.reg, "bidgate_token_signature_checks_total")
	}
	bid(n1)
	await.NoError(t, 10*time.Second, "n2 takes the token n1 verified", func() error {
		if v := testmetrics.Value(t, n2.reg, "bidgate_tokens_vouched_total", "result", "taken"); v != 1 {
			return fmt.Errorf("%v tokens taken", v)
		}
		return nil
	})
	if v := testmetrics.Value(t, n1.reg, "bidgate_tokens_told_total", "result", "taken"); v != 1 {
		t.Fatalf("n1 told %v tokens that n2 took, want 1", v)
	}
	before := checks(n2)
	bid(n2)
	if got := checks(n2) - before; got != 0 {
		t.Fatalf("n2 checked %v signatures for a bid with a token n1 told it, want none", got)
	}
	if r := n2.do("GET", "/me/bids", nil, "Authorization", "Bearer "+tok); r.status != 200 {
		t.Fatalf("GET /me/bids through n2: %d %s", r.status, r.raw)
	}
	if got := checks(n2) - before; got != 1 {
		t.Fatalf("n2 checked %v signatures for GET /me/bids with a told token, want 1: only bids take a peer's word", got)
	}
}

// The internal route takes only signed, well-formed tokens told with this
// node's keys; every refusal takes nothing.
func TestToldTokensRefused(t *testing.T) {
	db, _ := testdb.New(t, 8)
	n := startNode(t, "solo", db, testredis.Client(t))
	inner := internalOf(t, n)
	keys := n.srv.tokens.voucher.KeysFingerprint()
	tok := mint(t, signingKey(t), auth.Token{Subject: 9401, Scopes: []string{auth.ScopeBid}})
	sum := sha256.Sum256([]byte(tok))
	told := func(keys [32]byte, tokens ...toldToken) string {
		b, err := json.Marshal(toldTokens{Keys: sumEncoding.EncodeToString(keys[:]), Tokens: tokens})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	valid := toldToken{SHA256: sumEncoding.EncodeToString(sum[:]), Subject: "9401", Expires: time.Now().Add(time.Hour).Unix()}
	edit := func(f func(*toldToken)) toldToken { x := valid; f(&x); return x }
	nonces := 0
	signed := func(secret []byte, body string) []string {
		nonces++
		ts, nonce := fmt.Sprint(time.Now().Unix()), fmt.Sprintf("%032x", nonces)
		return []string{headerHop, "1", headerTimestamp, ts, headerSubject, "", headerNonce, nonce,
			headerSignature, sign(secret, "POST", tokensPath, "", ts, nonce, "", []byte(body))}
	}
	other := keys
	other[0] ^= 1
	for _, c := range []struct {
		name     string
		body     string
		unsigned bool
		secret   []byte
		status   int
		code     string
	}{
		{name: "unsigned", body: told(keys, valid), unsigned: true, status: 401, code: "bad_signature"},
		{name: "wrong secret", body: told(keys, valid), secret: []byte("other"), status: 401, code: "bad_signature"},
		{name: "malformed", body: `{"keys":`, status: 400, code: "malformed_json"},
		{name: "unknown member", body: strings.Replace(told(keys, valid), `"subject"`, `"scope":"operator","subject"`, 1), status: 400, code: "malformed_json"},
		{name: "no tokens", body: told(keys), status: 400, code: "bad_tokens"},
		{name: "too many tokens", body: told(keys, repeat(valid, maxToldTokens+1)...), status: 400, code: "bad_tokens"},
		{name: "short fingerprint", body: strings.Replace(told(keys, valid), sumEncoding.EncodeToString(keys[:]), "AAAA", 1), status: 400, code: "bad_tokens"},
		{name: "short digest", body: told(keys, edit(func(x *toldToken) { x.SHA256 = x.SHA256[:40] })), status: 400, code: "bad_tokens"},
		{name: "long digest", body: told(keys, edit(func(x *toldToken) { x.SHA256 += "AAAA" })), status: 400, code: "bad_tokens"},
		{name: "subject not a user id", body: told(keys, edit(func(x *toldToken) { x.Subject = "01" })), status: 400, code: "bad_tokens"},
		{name: "no exp", body: told(keys, edit(func(x *toldToken) { x.Expires = 0 })), status: 400, code: "bad_tokens"},
		{name: "other keys", body: told(other, valid), status: 409, code: "keys_differ"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var header []string
			if !c.unsigned {
				header = signed(c.secret, c.body)
				if c.secret == nil {
					header = signed(clusterSecret, c.body)
				}
			}
			wantProblem(t, inner.do("POST", tokensPath, c.body, header...), c.status, c.code)
		})
	}
	if v := testmetrics.Value(t, n.reg, "bidgate_tokens_vouched_total", "result", "taken"); v != 0 {
		t.Fatalf("%v tokens taken from refused requests", v)
	}
	expired := edit(func(x *toldToken) { x.Expires = time.Now().Add(-time.Minute).Unix() })
	body := told(keys, valid, expired)
	r := inner.do("POST", tokensPath, body, signed(clusterSecret, body)...)
	if r.status != 200 || r.body["taken"] != float64(1) {
		t.Fatalf("a valid and an expired token: %d %s, want 200 taking one", r.status, r.raw)
	}
}

func repeat(x toldToken, n int) []toldToken {
	out := make([]toldToken, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// membersCluster is stubCluster with a member list of its own.
type membersCluster struct {
	stubCluster
	members []ring.Member
}

func (c membersCluster) Members() []ring.Member { return c.members }

// Tokens go only to gateways that proved the cluster secret; one that
// answers the route with an unsigned 404 (an older version) is told
// nothing more.
func TestTellPeersSkipsOlderAndUnprovenNodes(t *testing.T) {
	notFound := func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusNotFound) }
	older, olderRequests := fakeOwner(t, notFound)
	unproven, unprovenRequests := fakeOwner(t, notFound)
	shardOnly, shardOnlyRequests := fakeOwner(t, notFound)
	gatewayMember := func(name, addr string, verified bool) ring.Member {
		m := shardMember(name, addr, verified)
		m.Roles = []string{ring.RoleGateway, ring.RoleShard}
		return m
	}
	self := gatewayMember("self", "", true)
	cluster := membersCluster{stubCluster: stubCluster{owner: self, self: self}, members: []ring.Member{self,
		gatewayMember("older", older, true), gatewayMember("unproven", unproven, false), shardMember("shard-only", shardOnly, true)}}
	v := testVerifier(t)
	reg := prometheus.NewRegistry()
	srv := New(Config{Cluster: cluster, ClusterSecret: clusterSecret, Auth: v}, panicky{}, func(context.Context) error { return nil }, reg,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range 2 {
		if _, err := v.Verify(mint(t, signingKey(t), auth.Token{Subject: int64(9501 + i), Scopes: []string{auth.ScopeBid}})); err != nil {
			t.Fatal(err)
		}
		srv.tellPeers(v.Vouches(maxToldTokens))
	}
	if n := olderRequests.Load(); n != 1 {
		t.Fatalf("the older node was told %d times, want once", n)
	}
	if n := unprovenRequests.Load() + shardOnlyRequests.Load(); n != 0 {
		t.Fatalf("an unproven member or a node without the gateway role was told %d times", n)
	}
	if v := testmetrics.Value(t, reg, "bidgate_tokens_told_total", "result", "failed"); v != 1 {
		t.Fatalf("%v tokens counted as failed, want 1", v)
	}
}
