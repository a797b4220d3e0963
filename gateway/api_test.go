package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/testdb"
)

func future(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

// validAuction is a body of POST /auctions; the seller is the token's
// subject, so sellerId is left out.
func validAuction() map[string]any {
	return map[string]any{"title": "Vintage Leica M3", "startPrice": "1000",
		"minIncrement": "10", "endTime": future(time.Hour)}
}

func with(m map[string]any, kv ...any) map[string]any {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return m
}

// createAuction creates an auction of testSeller.
func (s *testServer) createAuction(body map[string]any) int64 {
	s.t.Helper()
	return s.createAuctionAs(testSeller, body)
}

func (s *testServer) createAuctionAs(seller int64, body map[string]any) int64 {
	s.t.Helper()
	r := s.do("POST", "/auctions", body, as(s.t, seller, auth.ScopeSell)...)
	if r.status != 201 {
		s.t.Fatalf("create auction: %d %s", r.status, r.raw)
	}
	id, ok := r.body["id"].(float64)
	if !ok {
		s.t.Fatalf("create auction: no id in %s", r.raw)
	}
	return int64(id)
}

// bid places a bid with bidder's token (scope bid).
func (s *testServer) bid(bidder, auction int64, key string, body any) response {
	s.t.Helper()
	return s.do("POST", fmt.Sprintf("/auctions/%d/bids", auction), body,
		append([]string{"Idempotency-Key", key}, as(s.t, bidder, auth.ScopeBid)...)...)
}

func wantProblem(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.body["code"] != code {
		t.Fatalf("got %d %s, want %d with code %q", r.status, r.raw, status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	for _, k := range []string{"type", "title", "status", "detail", "code"} {
		if _, ok := r.body[k]; !ok {
			t.Fatalf("problem lacks %q: %s", k, r.raw)
		}
	}
}

func TestCreateAndGetAuction(t *testing.T) {
	s, _ := startServer(t)
	end, capTime := future(time.Hour), future(2*time.Hour)
	// sellerId may be given when it is the token's subject.
	r := s.do("POST", "/auctions", with(validAuction(), "sellerId", testSeller, "endTime", end, "title", "  Leica  ", "extendWindowSeconds", 30, "extendBySeconds", 60,
		"maxEndTime", capTime),
		as(t, testSeller, auth.ScopeSell)...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	id := int64(r.body["id"].(float64))
	if loc := r.header.Get("Location"); loc != fmt.Sprintf("/auctions/%d", id) {
		t.Fatalf("Location %q", loc)
	}
	g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil)
	wantEnd, _ := time.Parse(time.RFC3339Nano, end)
	wantEnd = wantEnd.Truncate(time.Microsecond)
	gotEnd, err := time.Parse(time.RFC3339Nano, g.body["endTime"].(string))
	if err != nil || !gotEnd.Equal(wantEnd) || !strings.HasSuffix(g.body["endTime"].(string), "Z") {
		t.Fatalf("endTime %v, want %s in UTC", g.body["endTime"], end)
	}
	wantCap, _ := time.Parse(time.RFC3339Nano, capTime)
	if gotCap, err := time.Parse(time.RFC3339Nano, fmt.Sprint(g.body["maxEndTime"])); err != nil || !gotCap.Equal(wantCap.Truncate(time.Microsecond)) {
		t.Fatalf("maxEndTime %v, want %s", g.body["maxEndTime"], capTime)
	}
	want := map[string]any{"id": float64(id), "sellerId": float64(testSeller), "title": "Leica", "currentPrice": "1000.00",
		"minIncrement": "10.00", "leaderId": nil, "status": "OPEN", "hot": false, "bidCount": float64(0),
		"extendWindowSeconds": float64(30), "extendBySeconds": float64(60)}
	for k, v := range want {
		if g.body[k] != v {
			t.Errorf("%s = %#v, want %#v", k, g.body[k], v)
		}
	}
}

func TestCreateAuctionRejectsBadInput(t *testing.T) {
	s, db := startServer(t)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"malformed JSON", `{"title":`, 400, "malformed_json"},
		{"empty body", ``, 400, "malformed_json"},
		{"not an object", `[1,2]`, 400, "malformed_json"},
		{"two objects", `{"title":"x"} {}`, 400, "malformed_json"},
		{"unknown field", with(validAuction(), "reserve", "5"), 400, "malformed_json"},
		{"duplicate start price", `{"title":"x","startPrice":"1","startPrice":"900","minIncrement":"1","endTime":"` + future(time.Hour) + `"}`, 400, "malformed_json"},
		{"case-mismatched key", `{"TITLE":"x","startPrice":"1","minIncrement":"1","endTime":"` + future(time.Hour) + `"}`, 400, "malformed_json"},
		{"invalid UTF-8 title", "{\"title\":\"caf\xe9\",\"startPrice\":\"1\",\"minIncrement\":\"1\",\"endTime\":\"" + future(time.Hour) + "\"}", 400, "malformed_json"},
		{"missing title", with(validAuction(), "title", nil), 400, "invalid_title"},
		{"blank title", with(validAuction(), "title", "   "), 400, "invalid_title"},
		{"title of 201 characters", with(validAuction(), "title", strings.Repeat("é", 201)), 400, "invalid_title"},
		{"title with NUL", with(validAuction(), "title", "a\x00b"), 400, "invalid_title"},
		{"another seller", with(validAuction(), "sellerId", testSeller+1), 403, "subject_mismatch"},
		{"negative seller", with(validAuction(), "sellerId", -1), 403, "subject_mismatch"},
		{"seller as string", with(validAuction(), "sellerId", fmt.Sprint(testSeller)), 400, "malformed_json"},
		{"fractional seller", with(validAuction(), "sellerId", 1.5), 400, "malformed_json"},
		{"missing start price", with(validAuction(), "startPrice", nil), 400, "invalid_amount"},
		{"negative start price", with(validAuction(), "startPrice", "-1"), 400, "invalid_amount"},
		{"three decimals", with(validAuction(), "startPrice", "2000.100"), 400, "invalid_amount"},
		{"leading zero", with(validAuction(), "startPrice", "05000"), 400, "invalid_amount"},
		{"exponent", `{"title":"x","startPrice":1e3,"minIncrement":"1","endTime":"` + future(time.Hour) + `"}`, 400, "invalid_amount"},
		{"NaN", with(validAuction(), "startPrice", "NaN"), 400, "invalid_amount"},
		{"over NUMERIC(14,2)", with(validAuction(), "startPrice", "1000000000000"), 400, "invalid_amount"},
		{"zero increment", with(validAuction(), "minIncrement", "0"), 400, "invalid_amount"},
		{"missing end", with(validAuction(), "endTime", nil), 400, "invalid_end_time"},
		{"end not RFC 3339", with(validAuction(), "endTime", "tomorrow"), 400, "invalid_end_time"},
		{"end in the past", with(validAuction(), "endTime", future(-time.Minute)), 400, "invalid_end_time"},
		{"end too far", with(validAuction(), "endTime", future(400*24*time.Hour)), 400, "invalid_end_time"},
		{"negative window", with(validAuction(), "extendWindowSeconds", -1), 400, "invalid_extension"},
		{"zero extension", with(validAuction(), "extendBySeconds", 0), 400, "invalid_extension"},
		{"huge extension", with(validAuction(), "extendBySeconds", 1<<40), 400, "invalid_extension"},
		{"cap not RFC 3339", with(validAuction(), "maxEndTime", "later"), 400, "invalid_end_time"},
		{"cap before the end", with(validAuction(), "maxEndTime", future(30*time.Minute)), 400, "invalid_end_time"},
		{"cap too far", with(validAuction(), "maxEndTime", future(400*24*time.Hour)), 400, "invalid_end_time"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, s.do("POST", "/auctions", c.body, as(t, testSeller, auth.ScopeSell)...), c.status, c.code)
		})
	}
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM auction`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d auctions stored after bad requests (err %v), want 0", n, err)
	}
}

func TestBidStatuses(t *testing.T) {
	s, db := startServer(t)
	id := s.createAuction(validAuction())

	key := uuid.NewString()
	// bidderId may be given when it is the token's subject.
	r := s.bid(42, id, key, map[string]any{"amount": 1250000})
	if r.status != 201 {
		t.Fatalf("first bid: %d %s", r.status, r.raw)
	}
	want := map[string]any{"auctionId": float64(id), "bidderId": float64(42), "amount": "1250000.00", "requestId": key, "seq": float64(1)}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("%s = %#v, want %#v", k, r.body[k], v)
		}
	}
	for _, k := range []string{"acceptedAt", "endTime"} {
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r.body[k])); err != nil {
			t.Errorf("%s = %v: %v", k, r.body[k], err)
		}
	}

	t.Run("replay is 200 with the same body", func(t *testing.T) {
		again := s.bid(42, id, strings.ToUpper(key), map[string]any{"amount": "1250000.00"})
		if again.status != 200 || again.raw != r.raw {
			t.Fatalf("replay: %d %s, want 200 %s", again.status, again.raw, r.raw)
		}
	})
	t.Run("reused key is 422", func(t *testing.T) {
		wantProblem(t, s.bid(42, id, key, map[string]any{"amount": 1260000}), 422, "idempotency_key_reused")
		// Another user's bid with the same key and amount: 422, never the
		// first user's bid.
		wantProblem(t, s.bid(43, id, key, map[string]any{"amount": 1250000}), 422, "idempotency_key_reused")
	})
	t.Run("too low is 409 with the price", func(t *testing.T) {
		low := s.bid(43, id, uuid.NewString(), map[string]any{"amount": "1250009.99"})
		wantProblem(t, low, 409, "bid_too_low")
		if low.body["currentPrice"] != "1250000.00" || low.body["minimumBid"] != "1250010.00" {
			t.Fatalf("too low body %s", low.raw)
		}
	})
	t.Run("amount as string with decimals", func(t *testing.T) {
		ok := s.bid(43, id, uuid.NewString(), map[string]any{"amount": "1250010.5"})
		if ok.status != 201 || ok.body["amount"] != "1250010.50" {
			t.Fatalf("got %d %s", ok.status, ok.raw)
		}
	})
	t.Run("unknown auction is 404", func(t *testing.T) {
		wantProblem(t, s.bid(43, id+100, uuid.NewString(), map[string]any{"amount": 5}), 404, "auction_not_found")
		wantProblem(t, s.do("GET", fmt.Sprintf("/auctions/%d", id+100), nil), 404, "auction_not_found")
	})
	t.Run("ended auction is 409 closed", func(t *testing.T) {
		short := s.createAuction(with(validAuction(), "endTime", future(1100*time.Millisecond), "extendWindowSeconds", 0))
		testdb.WaitForEnd(t, db, short)
		wantProblem(t, s.bid(43, short, uuid.NewString(), map[string]any{"amount": 5000}), 409, "auction_closed")
	})
}

func TestBidRejectsBadInput(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(validAuction())
	path := fmt.Sprintf("/auctions/%d/bids", id)
	good := map[string]any{"amount": 1010}
	key := uuid.NewString()
	cases := []struct {
		name   string
		path   string
		header []string
		body   any
		code   string
		status int
	}{
		{"no key", path, nil, good, "missing_idempotency_key", 400},
		{"key not a UUID", path, []string{"Idempotency-Key", "abc"}, good, "invalid_idempotency_key", 400},
		{"key without hyphens", path, []string{"Idempotency-Key", strings.ReplaceAll(key, "-", "")}, good, "invalid_idempotency_key", 400},
		{"nil key", path, []string{"Idempotency-Key", uuid.Nil.String()}, good, "invalid_idempotency_key", 400},
		{"non-numeric id", "/auctions/abc/bids", []string{"Idempotency-Key", key}, good, "invalid_id", 400},
		{"id overflow", "/auctions/99999999999999999999/bids", []string{"Idempotency-Key", key}, good, "invalid_id", 400},
		{"zero id", "/auctions/0/bids", []string{"Idempotency-Key", key}, good, "invalid_id", 400},
		{"leading zero id", fmt.Sprintf("/auctions/0%d/bids", id), []string{"Idempotency-Key", key}, good, "invalid_id", 400},
		{"signed id", fmt.Sprintf("/auctions/+%d/bids", id), []string{"Idempotency-Key", key}, good, "invalid_id", 400},
		{"duplicate amount", path, []string{"Idempotency-Key", key}, `{"amount":1010,"amount":2100}`, "malformed_json", 400},
		{"duplicate bidder", path, []string{"Idempotency-Key", key}, `{"bidderId":42,"bidderId":43,"amount":1010}`, "malformed_json", 400},
		{"case-mismatched key", path, []string{"Idempotency-Key", key}, `{"AMOUNT":1010}`, "malformed_json", 400},
		{"invalid UTF-8", path, []string{"Idempotency-Key", key}, "{\"amount\":\"1010\xff\"}", "malformed_json", 400},
		{"malformed JSON", path, []string{"Idempotency-Key", key}, `{`, "malformed_json", 400},
		{"unknown field", path, []string{"Idempotency-Key", key}, map[string]any{"x": 1, "amount": 1010}, "malformed_json", 400},
		{"missing amount", path, []string{"Idempotency-Key", key}, map[string]any{}, "invalid_amount", 400},
		{"null amount", path, []string{"Idempotency-Key", key}, `{"amount":null}`, "invalid_amount", 400},
		{"zero amount", path, []string{"Idempotency-Key", key}, map[string]any{"amount": 0}, "invalid_amount", 400},
		{"negative amount", path, []string{"Idempotency-Key", key}, map[string]any{"amount": -5}, "invalid_amount", 400},
		{"three decimals", path, []string{"Idempotency-Key", key}, `{"amount":1010.001}`, "invalid_amount", 400},
		{"exponent", path, []string{"Idempotency-Key", key}, `{"amount":1.01e3}`, "invalid_amount", 400},
		{"leading zero", path, []string{"Idempotency-Key", key}, map[string]any{"amount": "05000"}, "invalid_amount", 400},
		{"leading zeros before the point", path, []string{"Idempotency-Key", key}, map[string]any{"amount": "00.5"}, "invalid_amount", 400},
		{"NaN", path, []string{"Idempotency-Key", key}, map[string]any{"amount": "NaN"}, "invalid_amount", 400},
		{"over NUMERIC(14,2)", path, []string{"Idempotency-Key", key}, map[string]any{"amount": "1000000000000.00"}, "invalid_amount", 400},
		{"another bidder", path, []string{"Idempotency-Key", key}, map[string]any{"bidderId": 43, "amount": 1010}, "subject_mismatch", 403},
		{"zero bidder", path, []string{"Idempotency-Key", key}, map[string]any{"bidderId": 0, "amount": 1010}, "subject_mismatch", 403},
		{"bidder as string", path, []string{"Idempotency-Key", key}, map[string]any{"bidderId": "42", "amount": 1010}, "malformed_json", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, s.do("POST", c.path, c.body, append(c.header, as(t, 42, auth.ScopeBid)...)...), c.status, c.code)
		})
	}
	// An oversized body is refused from its Content-Length, before it is
	// read: only the headers are sent, so that the server closing the
	// connection cannot reset a client still writing.
	oversized := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		path, key, token(t, 42, auth.ScopeBid), 70<<10)
	if answer := send(t, strings.TrimPrefix(s.base, "http://"), oversized); !strings.HasPrefix(answer, "HTTP/1.1 413") || !strings.Contains(answer, `"code":"body_too_large"`) {
		t.Fatalf("oversized body: %s", answer)
	}
	// Nothing above changed the auction: the key is still fresh.
	if g := s.do("GET", fmt.Sprintf("/auctions/%d", id), nil); g.body["bidCount"] != float64(0) {
		t.Fatalf("auction changed by bad requests: %s", g.raw)
	}
	if r := s.bid(42, id, key, good); r.status != 201 || r.body["bidderId"] != float64(42) {
		t.Fatalf("good bid after the bad ones: %d %s", r.status, r.raw)
	}
}

// panicky is a shard that fails in the ways the gateway must survive.
type panicky struct{ err error }

func (p panicky) CreateAuction(context.Context, bidgate.NewAuction) (bidgate.Auction, error) {
	panic("boom")
}
func (p panicky) Auction(context.Context, int64) (bidgate.Auction, error) {
	return bidgate.Auction{}, p.err
}
func (p panicky) PlaceBid(context.Context, bidgate.BidRequest) (bidgate.BidResult, error) {
	return bidgate.BidResult{}, p.err
}
func (p panicky) Promote(context.Context, int64, string) (bidgate.Auction, error) {
	return bidgate.Auction{}, p.err
}
func (p panicky) Cancel(context.Context, int64, int64) (bidgate.Auction, error) {
	return bidgate.Auction{}, p.err
}
func (p panicky) ListAuctions(context.Context, bidgate.ListQuery) (bidgate.ListPage, error) {
	return bidgate.ListPage{}, p.err
}

func TestServerSurvivesPanicsAndOutages(t *testing.T) {
	down := fmt.Errorf("read: %w", errors.Join(bidgate.ErrUnavailable, context.DeadlineExceeded))
	s := serveOn(t, panicky{err: down}, func(context.Context) error { return errors.New("postgres down") })

	wantProblem(t, s.do("POST", "/auctions", validAuction(), as(t, testSeller, auth.ScopeSell)...), 500, "internal")
	r := s.bid(1, 1, uuid.NewString(), map[string]any{"amount": 5})
	wantProblem(t, r, 503, "unavailable")
	wantProblem(t, s.do("GET", "/auctions?q=lot", nil), 503, "unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	// The public readiness says not ready and nothing more; the admin
	// endpoint says why.
	r = s.do("GET", "/readyz", nil)
	wantProblem(t, r, 503, "not_ready")
	if strings.Contains(r.raw, "postgres") {
		t.Fatalf("the public /readyz tells why: %s", r.raw)
	}
	if d := s.admin().do("GET", "/readyz", nil); d.status != 503 || !strings.Contains(d.raw, "postgres down") {
		t.Fatalf("admin /readyz: %d %s", d.status, d.raw)
	}
	if h := s.do("GET", "/healthz", nil); h.status != 200 {
		t.Fatalf("healthz %d after a panic", h.status)
	}
}

func TestRoutesAndMetrics(t *testing.T) {
	s, _ := startServer(t)
	wantProblem(t, s.do("GET", "/nope", nil), 404, "route_not_found")
	wantProblem(t, s.do("DELETE", "/auctions/1", nil), 405, "method_not_allowed")
	// Operators' routes are on the admin endpoint only.
	for _, path := range []string{"/metrics", "/cluster/members", "/cluster/owner/1"} {
		wantProblem(t, s.do("GET", path, nil, as(t, 1, auth.ScopeOperator)...), 404, "route_not_found")
	}
	if r := s.do("GET", "/readyz", nil); r.status != 200 {
		t.Fatalf("readyz %d %s", r.status, r.raw)
	}
	id := s.createAuction(validAuction())
	s.bid(1, id, uuid.NewString(), map[string]any{"amount": 2000})
	s.bid(1, id, uuid.NewString(), map[string]any{"amount": 1})

	m := s.admin().do("GET", "/metrics", nil)
	for _, want := range []string{
		`bidgate_http_requests_total{route="place_bid",status="201"} 1`,
		`bidgate_http_requests_total{route="create_auction",status="201"} 1`,
		`bidgate_bids_total{outcome="accepted"} 1`,
		`bidgate_bids_total{outcome="too_low"} 1`,
		`bidgate_bid_duration_seconds_count{outcome="accepted"} 1`,
	} {
		if !strings.Contains(m.raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
