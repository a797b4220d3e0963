package bench

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"bidgate/internal/auth"
)

func TestTokensAreVerifiedCachedAndRenewed(t *testing.T) {
	key, err := auth.GenerateKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := auth.JWKS(key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), auth.Config{JWKS: jwks, Issuer: auth.DevIssuer, Audience: auth.DevAudience})
	if err != nil {
		t.Fatal(err)
	}
	tokens := NewTokens(key, auth.DevIssuer, auth.DevAudience, 0)
	for _, tc := range []struct {
		id    int64
		scope string
	}{{bidderFloor + 7, auth.ScopeBid}, {sellerID(3), auth.ScopeSell}, {1, auth.ScopeOperator}} {
		h, err := tokens.Header(tc.id, tc.scope)
		if err != nil {
			t.Fatal(err)
		}
		tok, ok := strings.CutPrefix(string(h), "Bearer ")
		if !ok {
			t.Fatalf("header %q does not start with Bearer", h)
		}
		p, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("%s token of %d: %v", tc.scope, tc.id, err)
		}
		if p.UserID != tc.id || !slices.Equal(p.Scopes, []string{tc.scope}) {
			t.Errorf("token of %d for %s: %+v", tc.id, tc.scope, p)
		}
		again, err := tokens.Header(tc.id, tc.scope)
		if err != nil {
			t.Fatal(err)
		}
		if &again[0] != &h[0] {
			t.Errorf("%s token of %d minted twice", tc.scope, tc.id)
		}
	}
	if _, err := tokens.Header(1, "admin"); err == nil {
		t.Error("a token for an unknown scope")
	}
	if _, err := NewTokens(nil, auth.DevIssuer, auth.DevAudience, 0).Header(1, auth.ScopeBid); err == nil {
		t.Error("a token without a key")
	}
	if _, err := (*Tokens)(nil).Header(1, auth.ScopeBid); err == nil {
		t.Error("a token from no cache")
	}

	short := NewTokens(key, auth.DevIssuer, auth.DevAudience, 40*time.Millisecond)
	first, err := short.Header(bidderFloor+1, auth.ScopeBid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(31 * time.Millisecond) // past 3/4 of the TTL
	second, err := short.Header(bidderFloor+1, auth.ScopeBid)
	if err != nil {
		t.Fatal(err)
	}
	if &first[0] == &second[0] {
		t.Error("a token past 3/4 of its TTL was not minted again")
	}
}

// TestSellersNeverBid: every seller id the harness creates auctions with is
// below every bidder id it bids with (bidgate refuses a seller's own bid).
func TestSellersNeverBid(t *testing.T) {
	maxSeller := int64(0)
	for i := range 3 * sellers {
		maxSeller = max(maxSeller, sellerID(i))
		if sellerID(i) < 1 {
			t.Fatalf("seller id %d", sellerID(i))
		}
	}
	for _, r := range []uint64{0, 1, 999_999_999, math.MaxUint64} {
		b := bidders{base: bidderBase(r)}
		b.reset(20_000)
		for range 3 {
			if id := b.id(); id <= maxSeller {
				t.Fatalf("bidder id %d is a seller's (sellers 1..%d)", id, maxSeller)
			}
		}
	}
	for _, n := range []int64{0, 1, 999, 1000, 1 << 40} {
		if id := limitBidder(n); id <= maxSeller {
			t.Fatalf("limit bidder id %d is a seller's", id)
		}
	}
}
