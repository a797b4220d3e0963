package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"bidgate/internal/auth"
)

// TestReservePrice: GET says whether the hidden reserve is met, never the
// reserve itself, and only on auctions that have one; cold and hot.
func TestReservePrice(t *testing.T) {
	s, _ := startServer(t)
	const bidder = 42
	for _, hot := range []bool{false, true} {
		t.Run(map[bool]string{false: "cold", true: "hot"}[hot], func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", hot, "reservePrice", "1555"))
			plain := s.createAuction(with(validAuction(), "hot", hot))
			check := func(wantMet bool) {
				t.Helper()
				g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil)
				if g.body["reserveMet"] != wantMet || g.shows("1555") || strings.Contains(g.raw, "reservePrice") {
					t.Fatalf("GET %s, want reserveMet %v and no reserve", g.raw, wantMet)
				}
			}
			check(false)
			for i, tc := range []struct {
				amount string
				met    bool
			}{{"1200", false}, {"1550", false}, {"1560", true}, {"1600", true}} {
				// Two bidders in turn: a leader's own straight bid is refused.
				if r := s.bid(bidder+int64(i%2), id, uuid.NewString(), map[string]any{"amount": tc.amount}); r.status != 201 || strings.Contains(r.raw, "reserve") {
					t.Fatalf("bid %s: %d %s", tc.amount, r.status, r.raw)
				}
				check(tc.met)
			}
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", plain), nil); strings.Contains(g.raw, "reserve") {
				t.Fatalf("an auction without a reserve shows %s", g.raw)
			}
		})
	}
	t.Run("below the start price", func(t *testing.T) {
		wantProblem(t, s.do("POST", "/auctions", with(validAuction(), "reservePrice", "999.99"), as(t, testSeller, auth.ScopeSell)...), 400, "invalid_amount")
	})
	t.Run("three decimals", func(t *testing.T) {
		wantProblem(t, s.do("POST", "/auctions", with(validAuction(), "reservePrice", "1500.001"), as(t, testSeller, auth.ScopeSell)...), 400, "invalid_amount")
	})
}
