package gateway

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate/closer"
	"bidgate/internal/auth"
	"bidgate/internal/testredis"
)

// The users of the privacy tests: two bidders besides testSeller, and an
// operator.
const (
	alice    int64 = 5_000_001
	bob      int64 = 5_000_002
	operator int64 = 5_000_009
)

// history reads every page of an auction's history with header, limit
// rows a page, and returns the rows, newest first.
func (s *testServer) history(id int64, limit int, header ...string) []map[string]any {
	s.t.Helper()
	var rows []map[string]any
	path := fmt.Sprintf("/auctions/%d/bids?limit=%d", id, limit)
	for pages := 0; ; pages++ {
		if pages > 100 {
			s.t.Fatal("the history never ends")
		}
		r := s.do("GET", path, nil, header...)
		if r.status != 200 {
			s.t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
		}
		items := r.body["items"].([]any)
		if len(items) > limit {
			s.t.Fatalf("GET %s: %d items", path, len(items))
		}
		for _, it := range items {
			rows = append(rows, it.(map[string]any))
		}
		next, ok := r.body["nextCursor"].(string)
		if !ok {
			return rows
		}
		path = fmt.Sprintf("/auctions/%d/bids?limit=%d&cursor=%s", id, limit, url.QueryEscape(next))
	}
}

// describe writes rows as "seq:bidder[:id][:you][:max]" for comparison.
func describe(rows []map[string]any) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%v:%v", r["seq"], strings.TrimPrefix(r["bidder"].(string), "Bidder "))
		if id, ok := r["bidderId"]; ok {
			fmt.Fprintf(&b, ":%d", int64(id.(float64)))
		}
		if r["you"] == true {
			b.WriteString(":you")
		}
		if m, ok := r["maxAmount"]; ok {
			fmt.Fprintf(&b, ":max%v", m)
		}
		b.WriteString(" ")
	}
	return b.String()
}

func (s *testServer) mustBid(bidder, auction int64, body map[string]any) {
	s.t.Helper()
	if r := s.bid(bidder, auction, uuid.NewString(), body); r.status != 201 {
		s.t.Fatalf("bid %v by %d: %d %s", body, bidder, r.status, r.raw)
	}
}

// Three users and the public read one history: everyone sees aliases in
// first-bid order; the seller and an operator see every id; a bidder sees
// their own id and maximum only; nobody sees another's maximum. The
// aliases stay as they were after the auction is promoted to the hot path.
func TestAuctionBidsPrivacy(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(validAuction())
	s.mustBid(bob, id, map[string]any{"amount": "1100"})
	s.mustBid(alice, id, map[string]any{"maxAmount": "1500"}) // leads at 1110
	s.mustBid(bob, id, map[string]any{"amount": "1200"})      // answered: alice's proxy at 1210

	tests := []struct {
		name   string
		header []string
		want   string
	}{
		{"public", nil, "4:2 3:1 2:2 1:1 "},
		{"seller", as(t, testSeller, auth.ScopeSell), fmt.Sprintf("4:2:%[1]d 3:1:%[2]d 2:2:%[1]d 1:1:%[2]d ", alice, bob)},
		{"operator", as(t, operator, auth.ScopeOperator), fmt.Sprintf("4:2:%[1]d 3:1:%[2]d 2:2:%[1]d 1:1:%[2]d ", alice, bob)},
		{"alice", as(t, alice, auth.ScopeBid), fmt.Sprintf("4:2:%[1]d:you 3:1 2:2:%[1]d:you:max1500.00 1:1 ", alice)},
		{"bob", as(t, bob, auth.ScopeBid), fmt.Sprintf("4:2 3:1:%[1]d:you 2:2 1:1:%[1]d:you ", bob)},
	}
	check := func(t *testing.T, when string) {
		for _, tc := range tests {
			for _, limit := range []int{1, 3, 100} {
				if got := describe(s.history(id, limit, tc.header...)); got != tc.want {
					t.Errorf("%s, %s, %d a page: %q, want %q", when, tc.name, limit, got, tc.want)
				}
			}
		}
	}
	check(t, "cold")
	if r := s.do("POST", fmt.Sprintf("/auctions/%d/promote", id), nil, as(t, operator, auth.ScopeOperator)...); r.status != 200 {
		t.Fatalf("promote: %d %s", r.status, r.raw)
	}
	check(t, "promoted")

	// A bad token is ignored, as on every public route: the public view.
	r := s.do("GET", fmt.Sprintf("/auctions/%d/bids", id), nil, "Authorization", "Bearer not-a-token")
	if r.status != 200 || strings.Contains(r.raw, "bidderId") {
		t.Fatalf("with a bad token: %d %s", r.status, r.raw)
	}
}

func TestAuctionBidsRefusals(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(validAuction())
	other := s.createAuction(validAuction())
	for i, bidder := range []int64{alice, bob, alice} {
		s.mustBid(bidder, id, map[string]any{"amount": fmt.Sprint(1100 + 10*i)})
		s.mustBid(bidder, other, map[string]any{"amount": fmt.Sprint(1100 + 10*i)})
	}
	first := s.do("GET", fmt.Sprintf("/auctions/%d/bids?limit=1", id), nil)
	cursor, _ := first.body["nextCursor"].(string)
	if first.status != 200 || cursor == "" {
		t.Fatalf("first page: %d %s", first.status, first.raw)
	}
	altered := []byte(cursor)
	altered[len(altered)/2] ^= 1
	otherCursor := s.do("GET", fmt.Sprintf("/auctions/%d/bids?limit=1", other), nil).body["nextCursor"].(string)

	tests := []struct {
		name, path   string
		status       int
		code, detail string
	}{
		{"limit 0", "?limit=0", 400, "invalid_query", "limit"},
		{"limit 101", "?limit=101", 400, "invalid_query", "limit"},
		{"limit not canonical", "?limit=01", 400, "invalid_query", "limit"},
		{"limit twice", "?limit=1&limit=2", 400, "invalid_query", "limit"},
		{"unknown parameter", "?sort=asc", 400, "invalid_query", "sort"},
		{"altered cursor", "?cursor=" + url.QueryEscape(string(altered)), 400, "invalid_cursor", ""},
		{"another auction's cursor", "?cursor=" + url.QueryEscape(otherCursor), 400, "invalid_cursor", ""},
		{"garbage cursor", "?cursor=%FF%00", 400, "invalid_cursor", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("GET", fmt.Sprintf("/auctions/%d/bids%s", id, tc.path), nil)
			wantProblem(t, r, tc.status, tc.code)
			if !strings.Contains(r.body["detail"].(string), tc.detail) {
				t.Fatalf("detail %q does not name %q", r.body["detail"], tc.detail)
			}
		})
	}
	wantProblem(t, s.do("GET", "/auctions/999999999999/bids", nil), 404, "auction_not_found")
	wantProblem(t, s.do("GET", "/auctions/01/bids", nil), 400, "invalid_id")
}

// myBids reads one page of /me/bids as user.
func (s *testServer) myBids(user int64, query string) response {
	s.t.Helper()
	r := s.do("GET", "/me/bids"+query, nil, as(s.t, user, auth.ScopeBid)...)
	if r.status != 200 {
		s.t.Fatalf("GET /me/bids%s as %d: %d %s", query, user, r.status, r.raw)
	}
	return r
}

// states is a /me/bids page as "auction:state:highest[:max]".
func states(r response) string {
	var b strings.Builder
	for _, it := range r.body["items"].([]any) {
		m := it.(map[string]any)
		a := m["auction"].(map[string]any)
		fmt.Fprintf(&b, "%d:%v:%v", int64(a["id"].(float64)), m["state"], m["highestBid"])
		if x, ok := m["maxAmount"]; ok {
			fmt.Fprintf(&b, ":%v", x)
		}
		b.WriteString(" ")
	}
	return b.String()
}

// /me/bids before and after the close, for two bidders, with a hot auction
// whose leader only Redis knows yet.
func TestMyBidsStates(t *testing.T) {
	s, db := startServer(t)
	cold := s.createAuction(validAuction())
	s.mustBid(alice, cold, map[string]any{"maxAmount": "1500"})
	s.mustBid(bob, cold, map[string]any{"amount": "1200"}) // alice's proxy answers at 1210
	hot := s.createAuction(validAuction())
	s.mustBid(alice, hot, map[string]any{"amount": "1100"})
	s.mustBid(bob, hot, map[string]any{"amount": "1150"})
	if r := s.do("POST", fmt.Sprintf("/auctions/%d/promote", hot), nil, as(t, operator, auth.ScopeOperator)...); r.status != 200 {
		t.Fatalf("promote: %d %s", r.status, r.raw)
	}
	// Decided in Redis; PostgreSQL's row still names bob (no pipeline
	// runs here), and alice's row there is still her 1100.
	s.mustBid(alice, hot, map[string]any{"amount": "1300"})

	for _, tc := range []struct {
		user  int64
		query string
		want  string
	}{
		{alice, "", fmt.Sprintf("%d:leading:1100.00 %d:leading:1210.00:1500.00 ", hot, cold)},
		{bob, "", fmt.Sprintf("%d:outbid:1150.00 %d:outbid:1200.00 ", hot, cold)},
		{alice, "?state=outbid", ""},
		{bob, "?state=leading", ""},
		{bob, "?state=outbid", fmt.Sprintf("%d:outbid:1150.00 %d:outbid:1200.00 ", hot, cold)},
		{bob, "?state=won", ""},
	} {
		if got := states(s.myBids(tc.user, tc.query)); got != tc.want {
			t.Errorf("open, %d%s: %q, want %q", tc.user, tc.query, got, tc.want)
		}
	}

	// Paging by one: the cursor carries the state filter.
	page := s.myBids(alice, "?limit=1")
	next, _ := page.body["nextCursor"].(string)
	if states(page) != fmt.Sprintf("%d:leading:1100.00 ", hot) || next == "" {
		t.Fatalf("first page of one: %s", page.raw)
	}
	if got := states(s.myBids(alice, "?limit=1&cursor="+url.QueryEscape(next))); got != fmt.Sprintf("%d:leading:1210.00:1500.00 ", cold) {
		t.Fatalf("second page: %q", got)
	}
	wantProblem(t, s.do("GET", "/me/bids?state=leading&cursor="+url.QueryEscape(next), nil, as(t, alice, auth.ScopeBid)...), 400, "invalid_cursor")
	wantProblem(t, s.do("GET", "/me/bids?limit=1&cursor="+url.QueryEscape(next), nil, as(t, bob, auth.ScopeBid)...), 400, "invalid_cursor")
	wantProblem(t, s.do("GET", "/me/bids?state=sold", nil, as(t, alice, auth.ScopeBid)...), 400, "invalid_query")
	wantProblem(t, s.do("GET", "/me/bids?userId=5000002", nil, as(t, alice, auth.ScopeBid)...), 400, "invalid_query")
	wantProblem(t, s.do("GET", "/me/bids", nil), 401, "unauthenticated")
	wantProblem(t, s.do("GET", "/me/bids", nil, as(t, alice, auth.ScopeSell)...), 403, "forbidden")

	// The cold auction ends and the closer settles it.
	ctx := context.Background()
	if _, err := db.Exec(ctx, `UPDATE auction SET end_time = clock_timestamp() - INTERVAL '1 second' WHERE id = $1`, cold); err != nil {
		t.Fatal(err)
	}
	if n, err := closer.New(db, testredis.Client(t), closer.Config{}, prometheus.NewRegistry()).CloseDue(ctx); err != nil || n != 1 {
		t.Fatalf("close: %d closed, %v", n, err)
	}
	if got, want := states(s.myBids(alice, "?state=won")), fmt.Sprintf("%d:won:1210.00:1500.00 ", cold); got != want {
		t.Errorf("after the close, alice: %q, want %q", got, want)
	}
	if got, want := states(s.myBids(bob, "")), fmt.Sprintf("%d:outbid:1150.00 %d:lost:1200.00 ", hot, cold); got != want {
		t.Errorf("after the close, bob: %q, want %q", got, want)
	}
}

// GET /auctions/{id} names the leader by alias to the public and by id to
// the seller, operators and the leader only, through the read cache and
// the encoded-answer memo, whichever view was asked first; the alias is
// the leader's alias in the history, cold, hot and across a promotion.
func TestLeaderPrivacy(t *testing.T) {
	s := startCachedServer(t)
	for _, start := range []string{"cold", "hot", "promoted"} {
		t.Run(start, func(t *testing.T) {
			id := s.createAuction(with(validAuction(), "hot", start == "hot"))
			s.mustBid(bob, id, map[string]any{"amount": "1100"})
			if start == "promoted" {
				if r := s.do("POST", fmt.Sprintf("/auctions/%d/promote", id), nil, as(t, operator, auth.ScopeOperator)...); r.status != 200 {
					t.Fatalf("promote: %d %s", r.status, r.raw)
				}
			}
			s.mustBid(alice, id, map[string]any{"amount": "1200"}) // alice leads as Bidder 2
			path := fmt.Sprintf("/auctions/%d?minSeq=2", id)
			views := []struct {
				name    string
				header  []string
				insider bool
			}{
				{"seller", as(t, testSeller, auth.ScopeSell), true},
				{"public", nil, false},
				{"leader", as(t, alice, auth.ScopeBid), true},
				{"outbid bidder", as(t, bob, auth.ScopeBid), false},
				{"operator", as(t, operator, auth.ScopeOperator), true},
				{"bad token", []string{"Authorization", "Bearer garbage"}, false},
			}
			tags := map[bool]string{}
			for range 2 { // the second round is answered from the memo
				for _, v := range views {
					g := s.do("GET", path, nil, v.header...)
					id, named := g.body["leaderId"]
					if g.status != 200 || g.body["leader"] != "Bidder 2" || named != v.insider || (named && id != float64(alice)) {
						t.Fatalf("%s: %d %s", v.name, g.status, g.raw)
					}
					if cc := g.header.Get("Cache-Control"); (cc == privateCacheControl) != v.insider {
						t.Fatalf("%s: Cache-Control %q", v.name, cc)
					}
					if tag, seen := tags[v.insider]; seen && tag != g.header.Get("ETag") {
						t.Fatalf("%s: ETag %q, the view's other answers had %q", v.name, g.header.Get("ETag"), tag)
					}
					tags[v.insider] = g.header.Get("ETag")
				}
			}
			if tags[true] == tags[false] {
				t.Fatalf("both views under ETag %s", tags[true])
			}
			// Hot rows reach the history through the pipeline, which does
			// not run here.
			if got := describe(s.history(id, 10)); start == "cold" && got != "2:2 1:1 " {
				t.Fatalf("history: %q", got)
			}
		})
	}
}
