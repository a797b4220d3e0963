package problem

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// TestWriteIsWhatEncodingJSONReads: an answer decodes to the problem
// written, whatever a detail quotes of a client's input, and is what
// encoding/json wrote before but for the characters it escapes needlessly.
func TestWriteIsWhatEncodingJSONReads(t *testing.T) {
	tooLow := New(fasthttp.StatusConflict, "bid_too_low", "bid too low: current price 1200.00, minimum bid 1210.00")
	tooLow.CurrentPrice, tooLow.MinimumBid = "1200.00", "1210.00"
	limited := New(fasthttp.StatusTooManyRequests, "rate_limited", "slow down")
	limited.RetryAfterSeconds = 3
	for _, tc := range []struct {
		name      string
		p         Problem
		retry     string // the Retry-After header
		sameBytes bool   // as encoding/json wrote them
	}{
		{"a refusal with prices", tooLow, "", true},
		{"no detail", New(fasthttp.StatusNotFound, "route_not_found", ""), "", true},
		{"quotes, backslashes, control characters", New(fasthttp.StatusBadRequest, "malformed_json", "a\x00b\tc\nd\x1f\x7f\"\\/é"), "", true},
		{"429 with its own Retry-After", limited, "3", true},
		{"503 takes the default", New(fasthttp.StatusServiceUnavailable, "unavailable", "try again"), "1", true},
		{"HTML and JavaScript characters", New(fasthttp.StatusBadRequest, "malformed_json", "request body: <script>&\u2028\u2029"), "", false},
		{"invalid UTF-8", New(fasthttp.StatusBadRequest, "malformed_json", "request body: \xff\xfe at 3"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.SetBodyString("an earlier body")
			Write(&ctx, tc.p)

			want := tc.p
			if tc.retry != "" && want.RetryAfterSeconds == 0 {
				want.RetryAfterSeconds = DefaultRetryAfter
			}
			wantBody, err := json.Marshal(want) // what Write wrote before
			if err != nil {
				t.Fatal(err)
			}
			body := ctx.Response.Body()
			if !utf8.Valid(body) {
				t.Errorf("body is not UTF-8: %q", body)
			}
			var got Problem
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			want.Detail = string([]rune(want.Detail)) // invalid UTF-8 as U+FFFD
			if got != want {
				t.Errorf("body decodes to\n %+v\nwant\n %+v", got, want)
			}
			// encoding/json escapes <, >, & and U+2028/9 and writes U+FFFD
			// as an escape: past those, the very same bytes.
			if tc.sameBytes && string(body) != string(wantBody) {
				t.Errorf("body\n got %s\nwant %s", body, wantBody)
			}
			if got := ctx.Response.StatusCode(); got != tc.p.Status {
				t.Errorf("status %d, want %d", got, tc.p.Status)
			}
			if got := string(ctx.Response.Header.ContentType()); got != "application/problem+json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := string(ctx.Response.Header.Peek("Retry-After")); got != tc.retry {
				t.Errorf("Retry-After %q, want %q", got, tc.retry)
			}
		})
	}
}

// BenchmarkWrite is the answer to most bids on a hot auction.
func BenchmarkWrite(b *testing.B) {
	p := New(fasthttp.StatusConflict, "bid_too_low", "bid too low: current price 1200.00, minimum bid 1210.00")
	p.CurrentPrice, p.MinimumBid = "1200.00", "1210.00"
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		Write(&ctx, p)
	}
}
