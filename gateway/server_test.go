package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate/gateway/openapi"
	"bidgate/internal/apitest"
	"bidgate/internal/auth"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/shard"
)

// The issuer and audience of the tests' tokens, and the seller of the
// auctions they create: an id no test bids as, unless it tests self-bidding.
const (
	testIssuer         = "https://issuer.test/"
	testAudience       = "bidgate-test"
	testSeller   int64 = 9_000_007
)

// testKey signs the tokens every test server trusts by default.
var testKey = sync.OnceValues(func() (*auth.SigningKey, error) { return auth.GenerateKey("EdDSA") })

func signingKey(t testing.TB) *auth.SigningKey {
	t.Helper()
	k, err := testKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testVerifier trusts tokens of testIssuer for testAudience signed by keys,
// by default testKey.
func testVerifier(t testing.TB, keys ...*auth.SigningKey) *auth.Verifier {
	t.Helper()
	if len(keys) == 0 {
		keys = []*auth.SigningKey{signingKey(t)}
	}
	set, err := auth.JWKS(keys...)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{JWKS: set, Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type tokenKey struct {
	user   int64
	scopes string
}

// tokens caches minted tokens: a signature costs tens of µs, and the load
// tests and benchmarks send thousands of requests.
var tokens sync.Map // tokenKey -> string

// token is a valid bearer token of user with scopes, signed by testKey,
// valid for an hour.
func token(t testing.TB, user int64, scopes ...string) string {
	t.Helper()
	k := tokenKey{user, strings.Join(scopes, " ")}
	if tok, ok := tokens.Load(k); ok {
		return tok.(string)
	}
	tok, err := signingKey(t).Mint(auth.Token{Subject: user, Scopes: scopes, Issuer: testIssuer, Audience: testAudience,
		Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tokens.Store(k, tok)
	return tok
}

// as is the Authorization header of user's token with scopes.
func as(t testing.TB, user int64, scopes ...string) []string {
	t.Helper()
	return []string{"Authorization", "Bearer " + token(t, user, scopes...)}
}

// testServer is a real gateway on a loopback port, backed by a fresh database.
type testServer struct {
	t         testing.TB
	base      string
	adminBase string               // the admin endpoint: /metrics, /cluster/*, detailed /readyz
	reg       *prometheus.Registry // the shard's metrics
	// contract is the OpenAPI document of the listener at base, which
	// every answer must match.
	contract *apitest.Contract
}

// The contracts of the public, admin and internal listener: the documents
// of gateway/openapi.
var (
	publicContract   = sync.OnceValues(func() (*apitest.Contract, error) { return apitest.New(openapi.Public()) })
	adminContract    = sync.OnceValues(func() (*apitest.Contract, error) { return apitest.New(openapi.Admin()) })
	internalContract = sync.OnceValues(func() (*apitest.Contract, error) { return apitest.New(openapi.Internal()) })
)

// internalOf is the testServer of n's internal listener.
func internalOf(t testing.TB, n *testNode) *testServer {
	t.Helper()
	c, err := internalContract()
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{t: t, base: "http://" + n.inner.Addr().String(), contract: c}
}

// newTestServer is the testServer of a public listener at base whose admin
// listener is at adminBase.
func newTestServer(t testing.TB, base, adminBase string, reg *prometheus.Registry) *testServer {
	t.Helper()
	c, err := publicContract()
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{t: t, base: base, adminBase: adminBase, reg: reg, contract: c}
}

// admin is the same server's admin endpoint.
func (s *testServer) admin() *testServer {
	s.t.Helper()
	c, err := adminContract()
	if err != nil {
		s.t.Fatal(err)
	}
	return &testServer{t: s.t, base: s.adminBase, adminBase: s.adminBase, reg: s.reg, contract: c}
}

// startServer serves a shard without rate limit or automatic promotion, so
// that tests may bid as often as they like.
func startServer(t testing.TB) (*testServer, *pgxpool.Pool) {
	return startServerWith(t, shard.Config{RateLimit: -1, PromoteRate: -1})
}

func startServerWith(t testing.TB, cfg shard.Config) (*testServer, *pgxpool.Pool) {
	t.Helper()
	return startGateway(t, Config{}, cfg)
}

// startGateway serves a shard of cfg with the gateway configured by gw.
func startGateway(t testing.TB, gw Config, cfg shard.Config) (*testServer, *pgxpool.Pool) {
	t.Helper()
	db, _ := testdb.New(t, 32)
	reg := prometheus.NewRegistry()
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout, cfg.ColdLockTimeout = testStoreTimeout, cmp.Or(cfg.ColdLockTimeout, testColdLockTimeout)
	}
	s := serveWith(t, gw, shard.New(db, testredis.Client(t), cfg, reg), db.Ping)
	s.reg = reg
	return s, db
}

func serveOn(t testing.TB, a Auctions, ready func(context.Context) error) *testServer {
	return serveWith(t, Config{}, a, ready)
}

// serveWith serves a with cfg; without cfg.Auth the server trusts testKey,
// without cfg.NodeID it is node "test".
func serveWith(t testing.TB, cfg Config, a Auctions, ready func(context.Context) error) *testServer {
	t.Helper()
	if cfg.Auth == nil {
		cfg.Auth = testVerifier(t)
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "test" // the binary requires one: every bid answer names its node
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(cfg, a, ready, prometheus.NewRegistry(), log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := serve(srv, ln, nil, admin)
	t.Cleanup(func() { ep.stop(t, 5*time.Second) })
	return newTestServer(t, "http://"+ln.Addr().String(), "http://"+admin.Addr().String(), nil)
}

// endpoints is a Server serving on its listeners.
type endpoints struct {
	srv    *Server
	lns    []net.Listener
	served chan error
}

// serve runs srv on public, internal (nil: none) and admin.
func serve(srv *Server, public, internal, admin net.Listener) *endpoints {
	e := &endpoints{srv: srv, served: make(chan error, 3)}
	run := func(ln net.Listener, fn func(net.Listener) error) {
		e.lns = append(e.lns, ln)
		go func() { e.served <- fn(ln) }()
	}
	run(public, srv.Serve)
	if internal != nil {
		run(internal, srv.ServeInternal)
	}
	run(admin, srv.ServeAdmin)
	return e
}

// stop shuts the server down, waiting up to limit for requests in flight,
// and fails the test on a Shutdown error other than those expected, or any
// Serve error.
func (e *endpoints) stop(t testing.TB, limit time.Duration, expected ...error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil && !slices.ContainsFunc(expected, func(x error) bool { return errors.Is(err, x) }) {
		t.Errorf("shutdown: %v", err)
	}
	for range e.lns {
		if err := <-e.served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// eventually polls cond until it returns nil, failing the test after limit
// with cond's last answer. It is for what announces no event (a server's
// socket bookkeeping, a background pipeline's writes); anything else is
// awaited.
func eventually(t testing.TB, limit time.Duration, what string, cond func() error) {
	t.Helper()
	await.NoError(t, limit, what, cond)
}

type response struct {
	status int
	header http.Header
	body   map[string]any // a JSON answer's object
	raw    string
}

// shows reports whether one of the answer's fields holds amount (as "1500"
// or "1500.00"), so that a hidden amount is looked for in the values, not
// in timestamps and ids that happen to contain its digits.
func (r response) shows(amount string) bool {
	for _, v := range r.body {
		if s := fmt.Sprint(v); s == amount || s == amount+".00" {
			return true
		}
	}
	return false
}

// do sends a request; body is sent as is when it is a string, else as JSON.
// header holds name, value pairs. An answer that s's contract does not
// describe fails the test.
func (s *testServer) do(method, path string, body any, header ...string) response {
	s.t.Helper()
	return s.doWith(http.DefaultClient, method, path, body, header...)
}

func (s *testServer) doWith(c *http.Client, method, path string, body any, header ...string) response {
	s.t.Helper()
	var sent []byte
	switch b := body.(type) {
	case nil:
	case string:
		sent = []byte(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatalf("request body: %v", err)
		}
		sent = j
	}
	var r io.Reader
	if sent != nil {
		r = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	if s.contract != nil {
		if err := s.contract.Check(req, sent, resp, raw); err != nil {
			s.t.Errorf("%v\n%s", err, raw)
		}
	}
	out := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	// JSON answers must parse; others (the metrics) stay raw.
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "application/json" || ct == "application/problem+json" {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			s.t.Fatalf("%s %s: %d answer of type %s is not a JSON object: %v: %s", method, path, resp.StatusCode, ct, err, raw)
		}
	}
	return out
}

// testStoreTimeout is the bid budget of these tests' shards: they check
// what is decided, not how fast, and a loaded test machine can take longer
// than the production default (shard TestColdBidGivesUpOnALockedRow and
// cmd/bidgate's stall tests check that budget).
const testStoreTimeout = time.Minute

// testColdLockTimeout is these shards' wait for a cold auction's row lock,
// for the same reason: bids racing for one row queue for it.
const testColdLockTimeout = 30 * time.Second

// A Shutdown that comes before, or while, Serve starts still ends it:
// fasthttp's own Shutdown does nothing to a listener its Serve has not
// taken yet (a node told to stop while it starts).
func TestShutdownEndsAServeThatHadNotBegun(t *testing.T) {
	for i := range 200 {
		srv := New(Config{Auth: testVerifier(t)}, nil, func(context.Context) error { return nil }, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		serve := func() { served <- srv.Serve(ln) }
		if i%2 == 0 {
			go serve() // races the Shutdown below
		}
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatalf("round %d: shutdown: %v", i, err)
		}
		if i%2 == 1 {
			go serve() // after it
		}
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("round %d: serve: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Serve still running 10s after Shutdown", i)
		}
	}
}
