package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/shard"
)

func TestHotAuctionOverHTTP(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(with(validAuction(), "hot", true))
	key := uuid.NewString()
	first := s.bid(42, id, key, map[string]any{"amount": "1500.50"})
	if first.status != 201 || first.body["amount"] != "1500.50" || first.body["seq"] != float64(1) {
		t.Fatalf("hot bid: %d %s", first.status, first.raw)
	}
	if again := s.bid(42, id, key, map[string]any{"amount": 1500.5}); again.status != 200 || again.raw != first.raw {
		t.Fatalf("hot replay: %d %s, want 200 %s", again.status, again.raw, first.raw)
	}
	wantProblem(t, s.bid(42, id, key, map[string]any{"amount": 1600}), 422, "idempotency_key_reused")
	low := s.bid(43, id, uuid.NewString(), map[string]any{"amount": 1505})
	wantProblem(t, low, 409, "bid_too_low")
	if low.body["minimumBid"] != "1510.50" {
		t.Fatalf("too low: %s", low.raw)
	}
	g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil)
	if _, named := g.body["leaderId"]; g.body["hot"] != true || g.body["currentPrice"] != "1500.50" || g.body["leader"] != "Bidder 1" || named || g.body["bidCount"] != float64(1) {
		t.Fatalf("GET of a hot auction: %s", g.raw)
	}
	if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil, as(t, 42, auth.ScopeBid)...); g.body["leaderId"] != float64(42) {
		t.Fatalf("GET of a hot auction by its leader: %s", g.raw)
	}
}

// Promotion is an operator's call: no token is 401, a token without the
// operator scope 403, an operator's token 200.
func TestPromoteOverHTTP(t *testing.T) {
	s, _ := startServer(t)

	id := s.createAuction(validAuction())
	key := uuid.NewString()
	cold := s.bid(42, id, key, map[string]any{"amount": 1100})
	path := fmt.Sprintf("/auctions/%d/promote", id)
	operator := as(t, 1, auth.ScopeOperator)

	wantProblem(t, s.do("POST", path, nil), 401, "unauthenticated")
	wantProblem(t, s.do("POST", path, nil, "Authorization", "Bearer wrong"), 401, "unauthenticated")
	wantProblem(t, s.do("POST", path, nil, as(t, 1, auth.ScopeBid, auth.ScopeSell)...), 403, "forbidden")
	if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["hot"] != false {
		t.Fatalf("promoted by a refused request: %s", g.raw)
	}
	r := s.do("POST", path, nil, operator...)
	if r.status != 200 || r.body["hot"] != true || r.body["currentPrice"] != "1100.00" {
		t.Fatalf("promote: %d %s", r.status, r.raw)
	}
	if again := s.do("POST", path, nil, operator...); again.status != 200 {
		t.Fatalf("second promote: %d %s", again.status, again.raw)
	}
	// The cold bid is still recognised on the hot path.
	if replay := s.bid(42, id, key, map[string]any{"amount": 1100}); replay.status != 200 || replay.raw != cold.raw {
		t.Fatalf("replay after promotion: %d %s, want %s", replay.status, replay.raw, cold.raw)
	}
	if next := s.bid(43, id, uuid.NewString(), map[string]any{"amount": 1200}); next.status != 201 || next.body["seq"] != float64(2) {
		t.Fatalf("hot bid after promotion: %d %s", next.status, next.raw)
	}
	wantProblem(t, s.do("POST", "/auctions/abc/promote", nil, operator...), 400, "invalid_id")
	wantProblem(t, s.do("POST", fmt.Sprintf("/auctions/%d/promote", id+1000), nil, operator...), 404, "auction_not_found")
}

func TestRateLimitedIs429WithRetryAfter(t *testing.T) {
	s, _ := startServerWith(t, shard.Config{RateLimit: 1, RateBurst: 1, PromoteRate: -1})
	id := s.createAuction(validAuction())
	bidder := rand.Int64N(1 << 50)
	if r := s.bid(bidder, id, uuid.NewString(), map[string]any{"amount": 1100}); r.status != 201 {
		t.Fatalf("first bid: %d %s", r.status, r.raw)
	}
	r := s.bid(bidder, id, uuid.NewString(), map[string]any{"amount": 1200})
	wantProblem(t, r, 429, "rate_limited")
	if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if other := s.bid(bidder+1, id, uuid.NewString(), map[string]any{"amount": 1200}); other.status != 201 {
		t.Fatalf("another bidder: %d %s", other.status, other.raw)
	}
}

func TestOverloadedIs503(t *testing.T) {
	s := serveOn(t, panicky{err: fmt.Errorf("auction 1: %w", bidgate.ErrOverloaded)}, func(context.Context) error { return nil })
	r := s.bid(1, 1, uuid.NewString(), map[string]any{"amount": 5})
	wantProblem(t, r, 503, "overloaded")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}
