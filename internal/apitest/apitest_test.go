package apitest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"bidgate/gateway/openapi"
)

// The documents load as valid OpenAPI, and each is the 3.1 with a version.
func TestDocumentsLoad(t *testing.T) {
	for name, doc := range map[string][]byte{"public": openapi.Public(), "admin": openapi.Admin()} {
		c, err := New(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !c.doc.IsOpenAPI31OrLater() || c.doc.OpenAPI != "3.1.0" {
			t.Errorf("%s: openapi %q, want 3.1.0", name, c.doc.OpenAPI)
		}
		if c.doc.Info.Version == "" {
			t.Errorf("%s: no info.version", name)
		}
	}
}

const auction = `{"id":1,"sellerId":7,"title":"Vintage Leica M3","startPrice":"1000.00","currentPrice":"1000.00",` +
	`"minIncrement":"10.00","minimumBid":"1010.00","leaderId":null,"leader":null,"status":"OPEN","endTime":"2030-01-02T15:04:05Z",` +
	`"hot":false,"bidCount":0,"extendWindowSeconds":120,"extendBySeconds":120,"createdAt":"2029-12-31T10:00:00.123456Z"}`

// exchange is one request and its answer, as a test client saw them.
type exchange struct {
	name    string
	method  string
	path    string
	reqBody string
	header  []string // of the request: name, value pairs
	status  int
	ctype   string
	answer  string
	hdr     []string // of the answer: name, value pairs
	wantErr string   // "" when the exchange is described
}

func problem(status int, code string) string {
	return `{"type":"urn:bidgate:problem:` + code + `","title":"` + http.StatusText(status) + `","status":` +
		strconv.Itoa(status) + `,"detail":"...","code":"` + code + `"}`
}

// Check accepts what the document describes and names what it does not:
// an undocumented status, field, code or header value fails.
func TestCheck(t *testing.T) {
	public, err := New(openapi.Public())
	if err != nil {
		t.Fatal(err)
	}
	const pj, j = "application/problem+json", "application/json"
	bid := []string{"Idempotency-Key", "3f1c7a52-8a3e-4c2b-9d43-2b8f0e6a9c11"}
	cached := []string{"ETag", `"a1-s0-OPEN-COLD-eab1cdef"`, "Cache-Control", "no-cache"}
	for _, x := range []exchange{
		{name: "an auction", method: "GET", path: "/auctions/1", status: 200, ctype: j, hdr: cached, answer: auction},
		{name: "a field too many", method: "GET", path: "/auctions/1", status: 200, ctype: j, hdr: cached,
			answer: strings.Replace(auction, `"hot":false`, `"hot":false,"reservePrice":"1800.00"`, 1), wantErr: "reservePrice"},
		{name: "three decimals", method: "GET", path: "/auctions/1", status: 200, ctype: j, hdr: cached,
			answer: strings.Replace(auction, `"currentPrice":"1000.00"`, `"currentPrice":"1000.000"`, 1), wantErr: "currentPrice"},
		{name: "not a time", method: "GET", path: "/auctions/1", status: 200, ctype: j, hdr: cached,
			answer: strings.Replace(auction, `"endTime":"2030-01-02T15:04:05Z"`, `"endTime":"tomorrow"`, 1), wantErr: "endTime"},
		{name: "an auction without its caching headers", method: "GET", path: "/auctions/1", status: 200, ctype: j, answer: auction,
			wantErr: "Cache-Control"},
		{name: "a documented code", method: "GET", path: "/auctions/1", status: 404, ctype: pj, answer: problem(404, "auction_not_found")},
		{name: "an undocumented code", method: "GET", path: "/auctions/1", status: 404, ctype: pj,
			answer: problem(404, "no_such_thing"), wantErr: "code"},
		{name: "an undocumented status", method: "GET", path: "/auctions/1", status: 409, ctype: pj,
			answer: problem(409, "auction_closed"), wantErr: "status is not supported"},
		{name: "a status that is not the body's", method: "GET", path: "/auctions/1", status: 404, ctype: pj,
			answer: strings.Replace(problem(404, "auction_not_found"), `"status":404`, `"status":410`, 1), wantErr: "status"},
		{name: "the wrong media type", method: "GET", path: "/auctions/1", status: 404, ctype: j,
			answer: problem(404, "auction_not_found"), wantErr: "Content-Type"},
		{name: "a 503 with Retry-After", method: "GET", path: "/auctions/1", status: 503, ctype: pj,
			answer: problem(503, "unavailable"), hdr: []string{"Retry-After", "1"}},
		{name: "a 503 without Retry-After", method: "GET", path: "/auctions/1", status: 503, ctype: pj,
			answer: problem(503, "unavailable"), wantErr: "Retry-After"},
		{name: "a created auction", method: "POST", path: "/auctions", status: 201, ctype: j, answer: auction,
			reqBody: `{"title":"Vintage Leica M3","startPrice":"1000","minIncrement":10,"endTime":"2030-01-02T15:04:05Z"}`,
			hdr:     []string{"Location", "/auctions/1"}},
		{name: "a created auction without Location", method: "POST", path: "/auctions", status: 201, ctype: j, answer: auction,
			reqBody: `{"title":"Vintage Leica M3","startPrice":"1000","minIncrement":"10","endTime":"2030-01-02T15:04:05Z"}`,
			wantErr: "Location"},
		{name: "an accepted request the document refuses", method: "POST", path: "/auctions", status: 201, ctype: j, answer: auction,
			reqBody: `{"title":"Vintage Leica M3","startPrice":"1000","minIncrement":"10","endTime":"2030-01-02T15:04:05Z","colour":"red"}`,
			hdr:     []string{"Location", "/auctions/1"}, wantErr: "accepted a request"},
		{name: "a bid labelled a form, read as JSON", method: "POST", path: "/auctions/1/bids", status: 201, ctype: j,
			reqBody: `{"amount":"1250"}`, header: append([]string{"Content-Type", "application/x-www-form-urlencoded"}, bid...),
			answer: `{"auctionId":1,"bidderId":42,"kind":"straight","amount":"1250.00","leading":true,"currentPrice":"1250.00",` +
				`"requestId":"3f1c7a52-8a3e-4c2b-9d43-2b8f0e6a9c11","acceptedAt":"2030-01-01T00:00:00.5Z","endTime":"2030-01-02T15:04:05Z","seq":1}`,
			hdr: []string{"X-Bidgate-Node", "node1"}},
		{name: "a refused request the document refuses too", method: "POST", path: "/auctions/1/bids", status: 400, ctype: pj,
			reqBody: `{"amount":"2000.100"}`, header: bid, answer: problem(400, "invalid_amount")},
		{name: "a 401 with its challenge", method: "POST", path: "/auctions/1/bids", status: 401, ctype: pj,
			answer: problem(401, "unauthenticated"), hdr: []string{"WWW-Authenticate", `Bearer realm="bidgate"`}},
		{name: "a 401 without its challenge", method: "POST", path: "/auctions/1/bids", status: 401, ctype: pj,
			answer: problem(401, "unauthenticated"), wantErr: "WWW-Authenticate"},
		{name: "the WebSocket upgrade", method: "GET", path: "/ws/auctions/1", status: 101,
			header: []string{"Upgrade", "websocket", "Connection", "Upgrade", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
			hdr:    []string{"Upgrade", "websocket", "Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}},
		{name: "a body where none is described", method: "GET", path: "/ws/auctions/1", status: 101, ctype: j, answer: `{}`,
			header: []string{"Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
			hdr:    []string{"Upgrade", "websocket", "Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="}, wantErr: "describes none"},
		{name: "no route", method: "GET", path: "/nope", status: 404, ctype: pj, answer: problem(404, "route_not_found")},
		{name: "no route, another code", method: "GET", path: "/nope", status: 404, ctype: pj,
			answer: problem(404, "auction_not_found"), wantErr: "route_not_found"},
		{name: "no such method", method: "DELETE", path: "/auctions/1", status: 405, ctype: pj, answer: problem(405, "method_not_allowed")},
		{name: "no such method, another status", method: "DELETE", path: "/auctions/1", status: 404, ctype: pj,
			answer: problem(404, "route_not_found"), wantErr: "405"},
	} {
		t.Run(x.name, func(t *testing.T) {
			req, err := http.NewRequest(x.method, "http://127.0.0.1:1"+x.path, strings.NewReader(x.reqBody))
			if err != nil {
				t.Fatal(err)
			}
			if x.reqBody != "" {
				req.Header.Set("Content-Type", j)
			}
			for i := 0; i+1 < len(x.header); i += 2 {
				req.Header.Set(x.header[i], x.header[i+1])
			}
			resp := &http.Response{StatusCode: x.status, Header: http.Header{}}
			if x.ctype != "" {
				resp.Header.Set("Content-Type", x.ctype)
			}
			for i := 0; i+1 < len(x.hdr); i += 2 {
				resp.Header.Set(x.hdr[i], x.hdr[i+1])
			}
			var reqBody []byte
			if x.reqBody != "" {
				reqBody = []byte(x.reqBody)
			}
			err = public.Check(req, reqBody, resp, []byte(x.answer))
			switch {
			case x.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case x.wantErr != "" && err == nil:
				t.Errorf("accepted, want an error naming %q", x.wantErr)
			case x.wantErr != "" && !strings.Contains(err.Error(), x.wantErr):
				t.Errorf("error %v, want one naming %q", err, x.wantErr)
			}
		})
	}
}
