package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

var modes = []struct {
	name string
	hot  bool
}{{"cold", false}, {"hot", true}}

// row is one line of an auction's history: who, at what, of which kind.
type row struct {
	bidder int64
	amount string
	kind   bidgate.BidKind
}

// history reads an auction's accepted rows in seq order from the store
// that serialized them: PostgreSQL for a cold auction, the Redis log for a
// hot one.
func history(t *testing.T, db *pgxpool.Pool, id int64, hot bool) []row {
	t.Helper()
	var out []row
	if hot {
		bids, err := redisstore.New(testredis.Client(t)).ReadLog(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range bids {
			if b.Seq != int64(i+1) {
				t.Fatalf("log entry %d has seq %d", i, b.Seq)
			}
			out = append(out, row{b.BidderID, b.Amount, b.Kind})
		}
		return out
	}
	rows, err := db.Query(context.Background(), `SELECT bidder_id, amount::text, kind FROM bid WHERE auction_id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.bidder, &r.amount, &r.kind); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantBid(t *testing.T, r response, status int, leading bool, price string) {
	t.Helper()
	if r.status != status || r.body["leading"] != leading || r.body["currentPrice"] != price {
		t.Fatalf("got %d %s, want %d leading %v at %s", r.status, r.raw, status, leading, price)
	}
}

// TestProxyWorkedExample is the worked example of docs/api.md, through the HTTP
// API, on a cold and a hot auction, with and without a reserve.
func TestProxyWorkedExample(t *testing.T) {
	s, db := startServer(t)
	const x, y, z = 101, 102, 103
	for _, m := range modes {
		for _, reserve := range []string{"", "1800"} {
			name := m.name
			if reserve != "" {
				name += ", reserve " + reserve
			}
			t.Run(name, func(t *testing.T) {
				body := with(validAuction(), "hot", m.hot) // start 1000, increment 10
				if reserve != "" {
					body["reservePrice"] = reserve
				}
				id := s.createAuction(body)
				proxy := func(max string) map[string]any { return map[string]any{"maxAmount": max} }

				r := s.bid(x, id, uuid.NewString(), proxy("1500"))
				wantBid(t, r, 201, true, "1010.00")
				if r.body["maxAmount"] != "1500.00" || r.body["kind"] != "proxy" || r.body["amount"] != "1010.00" {
					t.Fatalf("X's own answer: %s", r.raw)
				}
				yKey := uuid.NewString()
				r = s.bid(y, id, yKey, map[string]any{"amount": "1200"})
				wantBid(t, r, 201, false, "1210.00")
				if r.shows("1500") {
					t.Fatalf("Y's answer shows X's maximum: %s", r.raw)
				}
				wantBid(t, s.bid(y, id, yKey, map[string]any{"amount": "1200"}), 200, false, "1210.00") // the replay
				wantBid(t, s.bid(y, id, uuid.NewString(), proxy("1500")), 201, false, "1500.00")        // a tie: X stays
				want := "1510.00"
				if reserve != "" {
					want = "1800.00"
				}
				wantBid(t, s.bid(z, id, uuid.NewString(), proxy("2000")), 201, true, want)

				g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil)
				if _, named := g.body["leaderId"]; g.body["currentPrice"] != want || g.body["leader"] != "Bidder 3" || named || g.shows("2000") ||
					strings.Contains(g.raw, "max") {
					t.Fatalf("GET %s", g.raw)
				}
				if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil, as(t, testSeller, auth.ScopeSell)...); g.body["leaderId"] != float64(z) || g.shows("2000") {
					t.Fatalf("GET by the seller %s", g.raw)
				}
				if reserve != "" && g.body["reserveMet"] != true {
					t.Fatalf("GET %s: the reserve is met", g.raw)
				}
				got := history(t, db, id, m.hot)
				wantRows := []row{{x, "1010.00", "proxy"}, {y, "1200.00", "straight"}, {x, "1210.00", "automatic"},
					{y, "1500.00", "proxy"}, {x, "1500.00", "automatic"}, {z, want, "proxy"}}
				if fmt.Sprint(got) != fmt.Sprint(wantRows) {
					t.Fatalf("history\n got %v\nwant %v", got, wantRows)
				}
			})
		}
	}
}

// TestBidRules: each rule of a bid and its refusals through the HTTP API,
// cold and hot.
func TestBidRules(t *testing.T) {
	s, db := startServer(t)
	const leader, other = 201, 202
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", m.hot))
			wantProblem(t, s.bid(leader, id, uuid.NewString(), map[string]any{"amount": "1100", "maxAmount": "1200"}), 400, "invalid_amount")
			wantProblem(t, s.bid(leader, id, uuid.NewString(), map[string]any{}), 400, "invalid_amount")
			wantProblem(t, s.bid(leader, id, uuid.NewString(), map[string]any{"maxAmount": "1009.99"}), 409, "bid_too_low")
			wantProblem(t, s.bid(testSeller, id, uuid.NewString(), map[string]any{"maxAmount": "5000"}), 403, "self_bidding")

			// Rule 2: the first proxy leads at start + increment.
			wantBid(t, s.bid(leader, id, uuid.NewString(), map[string]any{"maxAmount": "1300"}), 201, true, "1010.00")
			// Rule 1: the leader's straight bid, a maximum not raised, one raised.
			wantProblem(t, s.bid(leader, id, uuid.NewString(), map[string]any{"amount": "1100"}), 409, "already_leading")
			wantProblem(t, s.bid(leader, id, uuid.NewString(), map[string]any{"maxAmount": "1300"}), 409, "max_not_raised")
			wantProblem(t, s.bid(leader, id, uuid.NewString(), map[string]any{"maxAmount": "1005"}), 409, "bid_too_low") // too low comes first
			r := s.bid(leader, id, uuid.NewString(), map[string]any{"maxAmount": "1400"})
			wantBid(t, r, 201, true, "1010.00")
			if r.body["seq"] != float64(2) || r.body["maxAmount"] != "1400.00" {
				t.Fatalf("raise: %s", r.raw)
			}
			// Rule 3: a straight bid at most the maximum is answered.
			r = s.bid(other, id, uuid.NewString(), map[string]any{"amount": "1395"})
			wantBid(t, r, 201, false, "1400.00") // min(Lmax, V + inc)
			if r.body["seq"] != float64(3) || r.body["amount"] != "1395.00" || r.body["maxAmount"] != nil {
				t.Fatalf("answered: %s", r.raw)
			}
			// Rule 2: a straight bid above the maximum leads at its amount.
			wantBid(t, s.bid(other, id, uuid.NewString(), map[string]any{"amount": "1450"}), 201, true, "1450.00")
			// Rule 2: a proxy above a straight leader leads at min(M, Lmax + inc).
			wantBid(t, s.bid(leader, id, uuid.NewString(), map[string]any{"maxAmount": "2000"}), 201, true, "1460.00")
			got := history(t, db, id, m.hot)
			want := []row{{leader, "1010.00", "proxy"}, {leader, "1010.00", "proxy"}, {other, "1395.00", "straight"},
				{leader, "1400.00", "automatic"}, {other, "1450.00", "straight"}, {leader, "1460.00", "proxy"}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("history\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestBuyNow: every case of a buy-now through the HTTP API, cold and hot.
func TestBuyNow(t *testing.T) {
	s, db := startServer(t)
	const buyer, bidder = 301, 302
	buyNow := func(id, user int64, key string) response {
		t.Helper()
		return s.do("POST", fmt.Sprintf("/auctions/%d/buy-now", id), nil,
			append([]string{"Idempotency-Key", key}, as(t, user, auth.ScopeBid)...)...)
	}
	t.Run("a price below start + increment or the reserve", func(t *testing.T) {
		for _, body := range []map[string]any{
			with(validAuction(), "buyNowPrice", "1009.99"),
			with(validAuction(), "buyNowPrice", "1500", "reservePrice", "1600"),
			with(validAuction(), "buyNowPrice", "-1"),
		} {
			wantProblem(t, s.do("POST", "/auctions", body, as(t, testSeller, auth.ScopeSell)...), 400, "invalid_amount")
		}
	})
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", m.hot, "buyNowPrice", "1500", "reservePrice", "1200"))
			if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["buyNowPrice"] != "1500.00" {
				t.Fatalf("GET %s", g.raw)
			}
			wantProblem(t, buyNow(id, testSeller, uuid.NewString()), 403, "self_bidding")
			key := uuid.NewString()
			r := buyNow(id, buyer, key)
			if r.status != 201 || r.body["kind"] != "buy_now" || r.body["amount"] != "1500.00" || r.body["seq"] != float64(1) {
				t.Fatalf("buy-now: %d %s", r.status, r.raw)
			}
			g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil, as(t, buyer, auth.ScopeBid)...)
			if g.body["status"] != "CLOSED" || g.body["leaderId"] != float64(buyer) || g.body["leader"] != "Bidder 1" || g.body["currentPrice"] != "1500.00" ||
				g.body["reserveMet"] != true {
				t.Fatalf("GET right after: %s", g.raw)
			}
			if r := buyNow(id, buyer, key); r.status != 200 || r.body["seq"] != float64(1) {
				t.Fatalf("replay: %d %s", r.status, r.raw)
			}
			wantProblem(t, buyNow(id, bidder, key), 422, "idempotency_key_reused")
			wantProblem(t, buyNow(id, bidder, uuid.NewString()), 409, "auction_closed")
			wantProblem(t, s.bid(bidder, id, uuid.NewString(), map[string]any{"amount": "2000"}), 409, "auction_closed")
			if got := history(t, db, id, m.hot); fmt.Sprint(got) != fmt.Sprint([]row{{buyer, "1500.00", "buy_now"}}) {
				t.Fatalf("history %v", got)
			}
			var end, closedEvents int
			if err := db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE end_time <= clock_timestamp()),
			        (SELECT count(*) FROM outbox WHERE topic = 'auction-closed' AND aggregate_id = $1)
			   FROM auction WHERE id = $1`, id).Scan(&end, &closedEvents); err != nil {
				t.Fatal(err)
			}
			// Cold: closed with its event in one transaction. Hot: Redis
			// closed it; the row's end moved back, so the closer settles it
			// now (closer TestHotBuyNowSettles).
			if end != 1 || closedEvents != map[bool]int{false: 1, true: 0}[m.hot] {
				t.Fatalf("row ended %d, %d auction-closed events", end, closedEvents)
			}
		})
		t.Run(m.name+": after a bid, or without a price", func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", m.hot, "buyNowPrice", "1500"))
			wantBid(t, s.bid(bidder, id, uuid.NewString(), map[string]any{"amount": "1010"}), 201, true, "1010.00")
			wantProblem(t, buyNow(id, buyer, uuid.NewString()), 409, "buy_now_unavailable")
			plain := s.createAuction(with(validAuction(), "hot", m.hot))
			wantProblem(t, buyNow(plain, buyer, uuid.NewString()), 409, "buy_now_unavailable")
		})
	}
}
