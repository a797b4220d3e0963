package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/await"
	"bidgate/shard"
)

// mint signs t with key, with the tests' issuer and audience unless t
// names others, valid for an hour unless t says otherwise.
func mint(t testing.TB, key *auth.SigningKey, tok auth.Token) string {
	t.Helper()
	if tok.Issuer == "" {
		tok.Issuer = testIssuer
	}
	if tok.Audience == "" {
		tok.Audience = testAudience
	}
	if tok.Expires.IsZero() {
		tok.Expires = time.Now().Add(time.Hour)
	}
	s, err := key.Mint(tok)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forged signs claims that would be valid, with a method the verifier must
// refuse: "none", or HS256 keyed with testKey's public key (the classic
// algorithm confusion), both naming testKey's kid.
func forged(t testing.TB, method jwt.SigningMethod) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": "42", "scope": "bid sell operator", "iss": testIssuer, "aud": testAudience,
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	tok := jwt.NewWithClaims(method, claims)
	tok.Header["kid"] = signingKey(t).ID
	var key any = jwt.UnsafeAllowNoneSignatureType
	if method != jwt.SigningMethodNone {
		key = publicKeyBytes(t, signingKey(t))
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publicKeyBytes is an Ed25519 key's public half, as its JWK publishes it.
func publicKeyBytes(t testing.TB, k *auth.SigningKey) []byte {
	t.Helper()
	raw, err := auth.JWKS(k)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct {
			X string `json:"x"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", raw, err)
	}
	x, err := base64.RawURLEncoding.DecodeString(set.Keys[0].X)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// challenge is what a 401 or 403 must say in WWW-Authenticate (RFC 6750):
// a bare Bearer challenge for a missing token, error="invalid_token" for a
// bad one, error="insufficient_scope" for a missing scope.
type challenge int

const (
	noChallenge challenge = iota
	bareChallenge
	invalidToken
	insufficientScope
)

func wantChallenge(t *testing.T, r response, want challenge) {
	t.Helper()
	h := r.header.Get("WWW-Authenticate")
	ok := false
	switch want {
	case noChallenge:
		ok = h == ""
	case bareChallenge:
		ok = strings.HasPrefix(h, "Bearer") && !strings.Contains(h, "error=")
	case invalidToken:
		ok = strings.HasPrefix(h, "Bearer") && strings.Contains(h, `error="invalid_token"`)
	case insufficientScope:
		ok = strings.HasPrefix(h, "Bearer") && strings.Contains(h, `error="insufficient_scope"`)
	}
	if !ok {
		t.Fatalf("WWW-Authenticate %q, want challenge %d", h, want)
	}
}

// TestBearerTokens sends every kind of credential to both user routes,
// through the real HTTP server: only a well-signed, current token for this
// service with the route's scope gets in, and the bidder or seller is its
// subject.
func TestBearerTokens(t *testing.T) {
	s, db := startGateway(t, Config{AuthFailureBurst: 1000}, shard.Config{RateLimit: -1, PromoteRate: -1})
	key := signingKey(t)
	other, err := auth.GenerateKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	valid := func(user int64, scopes ...string) auth.Token {
		return auth.Token{Subject: user, Scopes: scopes}
	}
	type tokenCase struct {
		name      string
		header    string // the Authorization header; empty: none
		status    int
		code      string
		challenge challenge
	}
	bearer := func(tok auth.Token) string { return "Bearer " + mint(t, key, tok) }
	cases := func(scope string) []tokenCase {
		tok := func(user int64) auth.Token { return valid(user, scope) }
		expired := func(ago time.Duration) auth.Token {
			tk := tok(11)
			tk.Expires = now.Add(-ago)
			return tk
		}
		notBefore := func(ahead time.Duration) auth.Token {
			tk := tok(12)
			tk.NotBefore = now.Add(ahead)
			return tk
		}
		wrongAud, wrongIss := tok(13), tok(14)
		wrongAud.Audience, wrongIss.Issuer = "another-service", "https://evil.test/"
		otherScopes := []string{auth.ScopeBid, auth.ScopeSell, auth.ScopeOperator}
		otherScopes = slicesWithout(otherScopes, scope)
		return []tokenCase{
			{"no token", "", 401, "unauthenticated", bareChallenge},
			{"basic credentials", "Basic dXNlcjpwYXNz", 401, "unauthenticated", bareChallenge},
			{"empty bearer", "Bearer ", 401, "unauthenticated", bareChallenge},
			{"garbage", "Bearer garbage", 401, "unauthenticated", invalidToken},
			{"three garbage segments", "Bearer a.b.c", 401, "unauthenticated", invalidToken},
			{"alg none", "Bearer " + forged(t, jwt.SigningMethodNone), 401, "unauthenticated", invalidToken},
			{"HS256 keyed with the public key", "Bearer " + forged(t, jwt.SigningMethodHS256), 401, "unauthenticated", invalidToken},
			{"signed by another key", "Bearer " + mint(t, other, tok(10)), 401, "unauthenticated", invalidToken},
			{"expired a minute ago, beyond the 30s leeway", bearer(expired(time.Minute)), 401, "unauthenticated", invalidToken},
			{"not valid for another 2 minutes", bearer(notBefore(2 * time.Minute)), 401, "unauthenticated", invalidToken},
			{"wrong audience", bearer(wrongAud), 401, "unauthenticated", invalidToken},
			{"wrong issuer", bearer(wrongIss), 401, "unauthenticated", invalidToken},
			{"subject 0", bearer(tok(0)), 401, "unauthenticated", invalidToken},
			{"negative subject", bearer(tok(-5)), 401, "unauthenticated", invalidToken},
			{"token without the scope", bearer(valid(15, otherScopes...)), 403, "forbidden", insufficientScope},
			{"token without scopes", bearer(valid(16)), 403, "forbidden", insufficientScope},
			{"scope that only starts like it", bearer(valid(17, scope+"x")), 403, "forbidden", insufficientScope},
			{"valid", bearer(tok(20)), 201, "", noChallenge},
			{"lower-case scheme", "bearer " + mint(t, key, tok(21)), 201, "", noChallenge},
			{"every scope", bearer(valid(22, auth.ScopeBid, auth.ScopeSell, auth.ScopeOperator)), 201, "", noChallenge},
			{"expired 20s ago, within the leeway", bearer(expired(20 * time.Second)), 201, "", noChallenge},
			{"valid in 20s, within the leeway", bearer(notBefore(20 * time.Second)), 201, "", noChallenge},
		}
	}
	invalid := 0 // requests with a token that failed verification
	accepted := 0
	id := s.createAuction(validAuction())
	routes := []struct {
		name, scope string
		send        func(header []string, i int) response
		subject     string // the field of the answer that names the user
	}{
		{"create auction", auth.ScopeSell, func(header []string, _ int) response {
			return s.do("POST", "/auctions", validAuction(), header...)
		}, "sellerId"},
		{"bid", auth.ScopeBid, func(header []string, i int) response {
			return s.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 2000 + 10*i},
				append([]string{"Idempotency-Key", uuid.NewString()}, header...)...)
		}, "bidderId"},
	}
	for _, route := range routes {
		for i, c := range cases(route.scope) {
			t.Run(route.name+"/"+c.name, func(t *testing.T) {
				var header []string
				if c.header != "" {
					header = []string{"Authorization", c.header}
				}
				r := route.send(header, i)
				if c.challenge == invalidToken {
					invalid++
				}
				wantChallenge(t, r, c.challenge)
				if c.status != 201 {
					wantProblem(t, r, c.status, c.code)
					return
				}
				if r.status != 201 {
					t.Fatalf("got %d %s, want 201", r.status, r.raw)
				}
				accepted++
				// The user is the token's subject.
				sub, _, err := jwt.NewParser().ParseUnverified(strings.Fields(c.header)[1], &jwt.RegisteredClaims{})
				if err != nil {
					t.Fatal(err)
				}
				if want, _ := sub.Claims.GetSubject(); fmt.Sprint(r.body[route.subject]) != want {
					t.Fatalf("%s %v, want the token's subject %s", route.subject, r.body[route.subject], want)
				}
			})
		}
	}
	// Refused requests changed nothing.
	var auctions, bids int
	if err := db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM auction), (SELECT count(*) FROM bid)`).Scan(&auctions, &bids); err != nil {
		t.Fatal(err)
	}
	if auctions+bids != 1+accepted {
		t.Fatalf("%d auctions and %d bids stored, want %d in all (one auction, then only the accepted requests)", auctions, bids, 1+accepted)
	}
	if m := s.admin().do("GET", "/metrics", nil); !strings.Contains(m.raw, "bidgate_auth_failures_total "+strconv.Itoa(invalid)+"\n") {
		t.Errorf("metrics do not count %d invalid tokens", invalid)
	}
}

func slicesWithout(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// Prices are public: reading an auction needs no token, and a bad one
// there is ignored.
func TestPublicRoutesNeedNoToken(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(validAuction())
	for _, header := range [][]string{nil, {"Authorization", "Bearer garbage"}} {
		if r := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil, header...); r.status != 200 || r.header.Get("WWW-Authenticate") != "" {
			t.Fatalf("GET with %v: %d %s", header, r.status, r.raw)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := s.do("GET", path, nil); r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
		}
	}
	if r := s.admin().do("GET", "/metrics", nil); r.status != 200 {
		t.Fatalf("GET /metrics on the admin endpoint: %d", r.status)
	}
}

// sellerId and bidderId may be left out; when given, they must be the
// token's subject (OWASP API1, object-level authorization).
func TestSubjectMismatch(t *testing.T) {
	s, db := startServer(t)
	seller := as(t, testSeller, auth.ScopeSell)
	for _, other := range []any{testSeller + 1, 0, -1} {
		r := s.do("POST", "/auctions", with(validAuction(), "sellerId", other), seller...)
		wantProblem(t, r, 403, "subject_mismatch")
	}
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM auction`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d auctions after refused creations (%v)", n, err)
	}

	for _, hot := range []bool{false, true} {
		t.Run(fmt.Sprintf("hot=%v", hot), func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", hot))
			key := uuid.NewString()
			wantProblem(t, s.bid(42, id, key, map[string]any{"bidderId": 43, "amount": 1100}), 403, "subject_mismatch")
			wantProblem(t, s.bid(42, id, key, map[string]any{"bidderId": testSeller, "amount": 1100}), 403, "subject_mismatch")
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["bidCount"] != float64(0) || g.body["leaderId"] != nil {
				t.Fatalf("auction changed by refused bids: %s", g.raw)
			}
			// The refused requests held nothing: the key is still fresh.
			if r := s.bid(42, id, key, map[string]any{"bidderId": 42, "amount": 1100}); r.status != 201 || r.body["bidderId"] != float64(42) {
				t.Fatalf("bid of the token's subject: %d %s", r.status, r.raw)
			}
		})
	}
}

// A seller cannot bid on their own auction (shill bidding), cold, hot or
// promoted, and the refused bid changes nothing.
func TestSelfBidding(t *testing.T) {
	s, _ := startServer(t)
	const seller int64 = 5_000_001
	for _, mode := range []string{"cold", "hot", "promoted"} {
		t.Run(mode, func(t *testing.T) {
			id := s.createAuctionAs(seller, with(validAuction(), "hot", mode == "hot"))
			if mode == "promoted" {
				if r := s.do("POST", fmt.Sprintf("/auctions/%d/promote", id), nil, as(t, 1, auth.ScopeOperator)...); r.status != 200 {
					t.Fatalf("promote: %d %s", r.status, r.raw)
				}
			}
			key := uuid.NewString()
			// A seller may also hold the bid scope: that is no licence.
			for _, body := range []map[string]any{{"amount": 1100}, {"bidderId": seller, "amount": 1100}} {
				wantProblem(t, s.bid(seller, id, key, body), 403, "self_bidding")
			}
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["bidCount"] != float64(0) || g.body["leaderId"] != nil {
				t.Fatalf("auction changed by the seller's bid: %s", g.raw)
			}
			// The refused key holds nothing: another bidder may use it.
			if r := s.bid(42, id, key, map[string]any{"amount": 1100}); r.status != 201 {
				t.Fatalf("another bidder: %d %s", r.status, r.raw)
			}
			wantProblem(t, s.bid(seller, id, uuid.NewString(), map[string]any{"amount": 1500}), 403, "self_bidding")
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil, as(t, seller, auth.ScopeSell)...); g.body["leaderId"] != float64(42) || g.body["currentPrice"] != "1100.00" {
				t.Fatalf("after the seller's second bid: %s", g.raw)
			}
		})
	}
}

// An Idempotency-Key held by one user's accepted bid is 422 for another
// user, never the first user's bid; the first user's replay is still 200.
func TestIdempotencyKeyOfAnotherUser(t *testing.T) {
	s, _ := startServer(t)
	for _, hot := range []bool{false, true} {
		t.Run(fmt.Sprintf("hot=%v", hot), func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", hot))
			key := uuid.NewString()
			first := s.bid(42, id, key, map[string]any{"amount": 1100})
			if first.status != 201 {
				t.Fatalf("first bid: %d %s", first.status, first.raw)
			}
			for _, body := range []map[string]any{{"amount": 1100}, {"bidderId": 43, "amount": 1100}, {"amount": 1200}} {
				wantProblem(t, s.bid(43, id, key, body), 422, "idempotency_key_reused")
			}
			if again := s.bid(42, id, key, map[string]any{"amount": 1100}); again.status != 200 || again.raw != first.raw {
				t.Fatalf("replay by the key's owner: %d %s, want 200 %s", again.status, again.raw, first.raw)
			}
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil, as(t, 42, auth.ScopeBid)...); g.body["leaderId"] != float64(42) || g.body["bidCount"] != float64(1) {
				t.Fatalf("after the other user's reuse: %s", g.raw)
			}
			// A key whose first use was refused holds nothing.
			refused := uuid.NewString()
			wantProblem(t, s.bid(43, id, refused, map[string]any{"amount": 1105}), 409, "bid_too_low")
			if r := s.bid(44, id, refused, map[string]any{"amount": 1200}); r.status != 201 || r.body["bidderId"] != float64(44) {
				t.Fatalf("a refused key used by another user: %d %s", r.status, r.raw)
			}
		})
	}
}

// After a burst of failed authentications an address gets 429 with
// Retry-After for everything that needs a token, even a valid one; other
// addresses, public routes and requests that authenticated are not
// affected, and the address recovers at the configured rate.
func TestFailedAuthenticationIsLimitedPerAddress(t *testing.T) {
	const burst = 3
	s, _ := startGateway(t, Config{AuthFailureRate: 1, AuthFailureBurst: burst}, shard.Config{RateLimit: -1, PromoteRate: -1})
	id := s.createAuction(validAuction())
	amount := 1000
	bid := func(c *http.Client, header ...string) response {
		t.Helper()
		amount += 10
		// Proxy bids with a rising maximum: the leader's are accepted too.
		return s.doWith(c, "POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"maxAmount": amount},
			append([]string{"Idempotency-Key", uuid.NewString()}, header...)...)
	}
	good := as(t, 42, auth.ScopeBid)
	c := http.DefaultClient

	// Authenticated requests, granted or not, draw nothing.
	for range 2 * burst {
		if r := bid(c, good...); r.status != 201 {
			t.Fatalf("valid bid: %d %s", r.status, r.raw)
		}
		wantProblem(t, bid(c, as(t, 42, auth.ScopeSell)...), 403, "forbidden")
	}
	for i := range burst {
		wantProblem(t, bid(c, "Authorization", fmt.Sprintf("Bearer garbage-%d", i)), 401, "unauthenticated")
	}
	limited := func(r response) {
		t.Helper()
		wantProblem(t, r, 429, "rate_limited")
		if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 {
			t.Fatalf("Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
		}
	}
	limited(bid(c, "Authorization", "Bearer garbage"))
	limited(bid(c))
	limited(bid(c, good...)) // a valid token costs no signature check either
	limited(s.do("POST", "/auctions", validAuction(), as(t, testSeller, auth.ScopeSell)...))
	if r := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); r.status != 200 {
		t.Fatalf("public route from a limited address: %d %s", r.status, r.raw)
	}

	// Another address is not limited.
	from := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer from.CloseIdleConnections()
	if r := bid(from, good...); r.status != 201 {
		t.Fatalf("valid bid from 127.0.0.2: %d %s", r.status, r.raw)
	}
	wantProblem(t, bid(from, "Authorization", "Bearer garbage"), 401, "unauthenticated")

	// The address recovers at 1 failure a second: the Retry-After it is
	// told is at most a second, and once it has passed a valid token passes.
	r := bid(c, good...)
	limited(r)
	wait, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || wait > 1 {
		t.Fatalf("Retry-After %q at 1 failure a second, want 1", r.header.Get("Retry-After"))
	}
	time.Sleep(time.Duration(wait) * time.Second) // the bucket refills with time: nothing to await but the time told
	if r := bid(c, good...); r.status != 201 {
		t.Fatalf("valid bid after the Retry-After: %d %s", r.status, r.raw)
	}
}

// ES256 and RS256 tokens verify as well as EdDSA ones, each key found by
// its kid in one JWKS.
func TestAlgorithms(t *testing.T) {
	keys := map[string]*auth.SigningKey{}
	var all []*auth.SigningKey
	for _, alg := range auth.Algorithms {
		k, err := auth.GenerateKey(alg)
		if err != nil {
			t.Fatal(err)
		}
		keys[alg] = k
		all = append(all, k)
	}
	s, _ := startGateway(t, Config{Auth: testVerifier(t, all...)}, shard.Config{RateLimit: -1, PromoteRate: -1})
	for i, alg := range auth.Algorithms {
		t.Run(alg, func(t *testing.T) {
			seller, bidder := int64(100+i), int64(200+i)
			r := s.do("POST", "/auctions", validAuction(),
				"Authorization", "Bearer "+mint(t, keys[alg], auth.Token{Subject: seller, Scopes: []string{auth.ScopeSell}}))
			if r.status != 201 || r.body["sellerId"] != float64(seller) {
				t.Fatalf("create with %s: %d %s", alg, r.status, r.raw)
			}
			r = s.do("POST", fmt.Sprintf("/auctions/%d/bids", int64(r.body["id"].(float64))), map[string]any{"amount": 1100},
				"Idempotency-Key", uuid.NewString(),
				"Authorization", "Bearer "+mint(t, keys[alg], auth.Token{Subject: bidder, Scopes: []string{auth.ScopeBid}}))
			if r.status != 201 || r.body["bidderId"] != float64(bidder) {
				t.Fatalf("bid with %s: %d %s", alg, r.status, r.raw)
			}
		})
	}
	// testKey is not in this server's set.
	wantProblem(t, s.do("POST", "/auctions", validAuction(), as(t, testSeller, auth.ScopeSell)...), 401, "unauthenticated")
}

// Key rotation with a JWKS file: while it holds the old and the new key
// both are accepted; once it holds only the new one, the old key's tokens
// are refused and the new key's still accepted.
func TestKeyRotationOverHTTP(t *testing.T) {
	oldKey, err := auth.GenerateKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := auth.GenerateKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, file, oldKey, newKey)
	log := await.NewLog()
	v, err := auth.NewVerifier(t.Context(), auth.Config{JWKSFile: file, Issuer: testIssuer, Audience: testAudience,
		FileCheck: 20 * time.Millisecond, Log: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startGateway(t, Config{Auth: v}, shard.Config{RateLimit: -1, PromoteRate: -1})
	// An empty body: 400 once the token is accepted, 401 if it is not.
	probe := func(k *auth.SigningKey) response {
		return s.do("POST", "/auctions", `{}`,
			"Authorization", "Bearer "+mint(t, k, auth.Token{Subject: testSeller, Scopes: []string{auth.ScopeSell}}))
	}
	for _, k := range []*auth.SigningKey{oldKey, newKey} {
		wantProblem(t, probe(k), 400, "invalid_title")
	}

	writeJWKS(t, file, newKey)
	log.Message(t, "JWKS file changed; keys reloaded", 5*time.Second)
	r := probe(oldKey)
	wantProblem(t, r, 401, "unauthenticated")
	wantChallenge(t, r, invalidToken)
	wantProblem(t, probe(newKey), 400, "invalid_title")
	if r := s.do("POST", "/auctions", validAuction(),
		"Authorization", "Bearer "+mint(t, newKey, auth.Token{Subject: testSeller, Scopes: []string{auth.ScopeSell}})); r.status != 201 {
		t.Fatalf("create with the new key: %d %s", r.status, r.raw)
	}
}

// writeJWKS replaces file, atomically, with the public keys of keys.
func writeJWKS(t testing.TB, file string, keys ...*auth.SigningKey) {
	t.Helper()
	set, err := auth.JWKS(keys...)
	if err != nil {
		t.Fatal(err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, set, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

// With authentication off (an explicit, warned development mode) no token
// is needed and the body names the users; without them the request is 400.
func TestAuthOff(t *testing.T) {
	s, _ := startGateway(t, Config{AuthOff: true}, shard.Config{RateLimit: -1, PromoteRate: -1})
	wantProblem(t, s.do("POST", "/auctions", validAuction()), 400, "invalid_seller_id")
	r := s.do("POST", "/auctions", with(validAuction(), "sellerId", 7))
	if r.status != 201 || r.body["sellerId"] != float64(7) {
		t.Fatalf("create without a token: %d %s", r.status, r.raw)
	}
	id := int64(r.body["id"].(float64))
	path := fmt.Sprintf("/auctions/%d/bids", id)
	wantProblem(t, s.do("POST", path, map[string]any{"amount": 1100}, "Idempotency-Key", uuid.NewString()), 400, "invalid_bidder_id")
	wantProblem(t, s.do("POST", path, map[string]any{"bidderId": 7, "amount": 1100}, "Idempotency-Key", uuid.NewString()), 403, "self_bidding")
	if b := s.do("POST", path, map[string]any{"bidderId": 42, "amount": 1100}, "Idempotency-Key", uuid.NewString()); b.status != 201 || b.body["bidderId"] != float64(42) {
		t.Fatalf("bid without a token: %d %s", b.status, b.raw)
	}
	if p := s.do("POST", fmt.Sprintf("/auctions/%d/promote", id), nil); p.status != 200 {
		t.Fatalf("promote without a token: %d %s", p.status, p.raw)
	}
}

// The user a request acts as is the token's subject; with authentication
// off, the user the body names.
func TestActingUser(t *testing.T) {
	seven, eight := int64(7), int64(8)
	for _, tc := range []struct {
		name    string
		subject int64
		named   *int64
		want    int64
		wantErr string // the input error's code, or "mismatch"
	}{
		{"token only", 7, nil, 7, ""},
		{"token and the same user named", 7, &seven, 7, ""},
		{"token and another user named", 7, &eight, 0, "mismatch"},
		{"authentication off, user named", 0, &eight, 8, ""},
		{"authentication off, no user named", 0, nil, 0, "invalid_bidder_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := actingUser(tc.subject, tc.named, "bidderId", "invalid_bidder_id")
			var input *bidgate.InputError
			switch {
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("actingUser = %d, %v; want %d", got, err, tc.want)
			case tc.wantErr == "mismatch" && !errors.Is(err, bidgate.ErrSubjectMismatch):
				t.Fatalf("actingUser = %d, %v; want ErrSubjectMismatch", got, err)
			case tc.wantErr != "" && tc.wantErr != "mismatch" && (!errors.As(err, &input) || input.Code != tc.wantErr ||
				input.Detail != "bidderId is required when authentication is off"):
				t.Fatalf("actingUser = %d, %v; want the input error %s", got, err, tc.wantErr)
			}
		})
	}
}

// TestSignatureChecksCounted: bidgate_token_signature_checks_total counts
// the tokens whose signature this node checked, not the cached ones.
func TestSignatureChecksCounted(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(validAuction())
	checks := func() int {
		t.Helper()
		m := s.admin().do("GET", "/metrics", nil)
		for line := range strings.Lines(m.raw) {
			if v, ok := strings.CutPrefix(line, "bidgate_token_signature_checks_total "); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("no bidgate_token_signature_checks_total in %s", m.raw)
		return 0
	}
	key := signingKey(t)
	a := mint(t, key, auth.Token{Subject: 9101, Scopes: []string{auth.ScopeBid}})
	b := mint(t, key, auth.Token{Subject: 9102, Scopes: []string{auth.ScopeBid}})
	before := checks()
	for i, tok := range []string{a, b, a, b, a} { // a leader may not outbid itself
		r := s.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 1010 + 10*i},
			"Idempotency-Key", uuid.NewString(), "Authorization", "Bearer "+tok)
		if r.status != 201 {
			t.Fatalf("bid %d: %d %s", i, r.status, r.raw)
		}
	}
	if got := checks() - before; got != 2 {
		t.Fatalf("%d signatures checked for two tokens used five times, want 2", got)
	}
}
