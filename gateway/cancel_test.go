package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/auth"
	"bidgate/internal/testdb"
)

// TestSellerCancel: every case of a seller's cancel, on a cold and on a hot
// auction, through the HTTP API.
func TestSellerCancel(t *testing.T) {
	const bidder = 42
	s, db := startServer(t)
	cancel := func(id, user int64) response {
		t.Helper()
		return s.do("POST", fmt.Sprintf("/auctions/%d/cancel", id), nil, as(t, user, auth.ScopeSell)...)
	}
	cancelEvents := func(id int64) []map[string]any {
		t.Helper()
		rows, err := db.Query(context.Background(), `SELECT payload FROM outbox WHERE topic = 'auction-cancelled' AND aggregate_id = $1`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []map[string]any
		for rows.Next() {
			var raw []byte
			if err := rows.Scan(&raw); err != nil {
				t.Fatal(err)
			}
			var e map[string]any
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, hot := range []bool{false, true} {
		mode := map[bool]string{false: "cold", true: "hot"}[hot]
		newAuction := func(d time.Duration) int64 {
			t.Helper()
			return s.createAuction(with(validAuction(), "hot", hot, "endTime", future(d)))
		}
		t.Run(mode+": the seller cancels before any bid; a repeat is 200; bids are refused", func(t *testing.T) {
			id := newAuction(time.Hour)
			for i := range 2 {
				r := cancel(id, testSeller)
				if r.status != 200 || r.body["status"] != "CANCELLED" || r.body["id"] != float64(id) {
					t.Fatalf("cancel %d: %d %s", i+1, r.status, r.raw)
				}
			}
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["status"] != "CANCELLED" {
				t.Fatalf("GET after cancel: %s", g.raw)
			}
			wantProblem(t, s.bid(bidder, id, uuid.NewString(), map[string]any{"amount": "2000"}), 409, "auction_closed")
			events := cancelEvents(id)
			if len(events) != 1 || events[0]["auctionId"] != float64(id) || events[0]["sellerId"] != float64(testSeller) || events[0]["cancelledAt"] == nil {
				t.Fatalf("auction-cancelled outbox rows: %v, want exactly one", events)
			}
		})
		t.Run(mode+": after a bid, 409 has_bids", func(t *testing.T) {
			id := newAuction(time.Hour)
			if r := s.bid(bidder, id, uuid.NewString(), map[string]any{"amount": "2000"}); r.status != 201 {
				t.Fatalf("bid: %d %s", r.status, r.raw)
			}
			wantProblem(t, cancel(id, testSeller), 409, "has_bids")
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["status"] != "OPEN" || g.body["bidCount"] != float64(1) {
				t.Fatalf("GET after a refused cancel: %s", g.raw)
			}
		})
		t.Run(mode+": after the end, 409 auction_closed", func(t *testing.T) {
			id := newAuction(1200 * time.Millisecond)
			testdb.WaitForEnd(t, db, id)
			wantProblem(t, cancel(id, testSeller), 409, "auction_closed")
			if n := len(cancelEvents(id)); n != 0 {
				t.Fatalf("%d cancel events for an ended auction", n)
			}
		})
		t.Run(mode+": anyone else, 403 forbidden", func(t *testing.T) {
			id := newAuction(time.Hour)
			wantProblem(t, cancel(id, testSeller+1), 403, "forbidden")
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["status"] != "OPEN" {
				t.Fatalf("GET after a stranger's cancel: %s", g.raw)
			}
		})
	}
	t.Run("a bid token cannot cancel", func(t *testing.T) {
		id := s.createAuction(validAuction())
		r := s.do("POST", fmt.Sprintf("/auctions/%d/cancel", id), nil, as(t, testSeller, auth.ScopeBid)...)
		if r.status != 403 {
			t.Fatalf("cancel with scope bid: %d %s", r.status, r.raw)
		}
	})
	t.Run("unknown auction, 404", func(t *testing.T) {
		wantProblem(t, cancel(1<<50, testSeller), 404, "auction_not_found")
	})
}
