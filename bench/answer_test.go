package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate"
)

// TestAnswerDecoder checks the token decoder against encoding/json (what
// the loader used before) on the bodies bidgate answers bids with.
func TestAnswerDecoder(t *testing.T) {
	type v1Answer struct {
		Seq          int64     `json:"seq"`
		AcceptedAt   time.Time `json:"acceptedAt"`
		EndTime      time.Time `json:"endTime"`
		Code         string    `json:"code"`
		Kind         string    `json:"kind"`
		Amount       string    `json:"amount"`
		MaxAmount    string    `json:"maxAmount"`
		Leading      bool      `json:"leading"`
		CurrentPrice string    `json:"currentPrice"`
	}
	bodies := []struct {
		name, body string
		ok         bool
	}{
		{"201", `{"auctionId":42,"bidderId":1000001,"amount":"1001.00","requestId":"6f1c2b1e-7f5a-4d2e-9a57-0c1f4f3b2a10",` +
			`"acceptedAt":"2030-01-02T15:04:05.123456Z","endTime":"2030-01-02T16:04:05Z","seq":17}`, true},
		{"201 to a proxy bid", `{"auctionId":42,"bidderId":1000001,"kind":"proxy","amount":"1010.00","maxAmount":"1500.00",` +
			`"leading":true,"currentPrice":"1010.00","requestId":"6f1c2b1e-7f5a-4d2e-9a57-0c1f4f3b2a10",` +
			`"acceptedAt":"2030-01-02T15:04:05.123456Z","endTime":"2030-01-02T16:04:05Z","seq":1}`, true},
		{"201 answered by the leader's proxy", `{"kind":"straight","amount":"1200.00","leading":false,"currentPrice":"1210.00","seq":2}`, true},
		{"a buy-now", `{"kind":"buy_now","amount":"1500.00","leading":true,"currentPrice":"1500.00","seq":1}`, true},
		{"an unknown kind, escaped", `{"kind":"auto\u006datic2","maxAmount":null}`, true},
		{"409 already_leading", `{"type":"urn:bidgate:problem:already_leading","title":"Conflict","status":409,"code":"already_leading"}`, true},
		{"fields in another order", `{"seq":3,"endTime":"2030-01-02T16:04:05+01:00","acceptedAt":"2030-01-02T15:04:05Z"}`, true},
		{"409 problem", `{"type":"urn:bidgate:problem:bid_too_low","title":"Conflict","status":409,"detail":"the bid must be at least 1002.00",` +
			`"code":"bid_too_low","minimumBid":"1002.00","currentPrice":"1001.00"}`, true},
		{"nested fields are not the answer's", `{"code":"invalid_body","errors":[{"seq":9,"code":"x"}],"extra":{"endTime":"2031-01-01T00:00:00Z"}}`, true},
		{"escaped string", `{"code":"a\"b\u00e9","seq":1}`, true},
		{"empty object", `{}`, true},
		{"not JSON", `upstream connect error`, false},
		{"empty", ``, false},
		{"an array", `[1,2]`, false},
		{"seq not a number", `{"seq":"17"}`, false},
		{"bad time", `{"acceptedAt":"yesterday"}`, false},
		{"leading not a boolean", `{"leading":"yes"}`, false},
		{"cut short", `{"seq":17,"acceptedAt":"2030-01-02T15:0`, false},
	}
	var d answerDecoder // reused, as a worker does
	for _, tc := range bodies {
		t.Run(tc.name, func(t *testing.T) {
			var got bidAnswer
			err := d.decode([]byte(tc.body), &got)
			var want v1Answer
			werr := json.Unmarshal([]byte(tc.body), &want)
			if (err == nil) != tc.ok || (werr == nil) != tc.ok {
				t.Fatalf("decode: %v, encoding/json: %v; want ok %v", err, werr, tc.ok)
			}
			if !tc.ok {
				return
			}
			if got.Seq != want.Seq || !got.AcceptedAt.Equal(want.AcceptedAt) || !got.EndTime.Equal(want.EndTime) || got.Code != want.Code ||
				got.Kind != want.Kind || got.Amount != want.Amount || got.MaxAmount != want.MaxAmount || got.Leading != want.Leading ||
				got.CurrentPrice != want.CurrentPrice {
				t.Errorf("decode = %+v, encoding/json = %+v", got, want)
			}
		})
	}
}

// TestCentsAsBidgateWritesThem: the amounts the harness sends are the text
// bidgate.FormatMoney writes.
func TestCentsAsBidgateWritesThem(t *testing.T) {
	check := func(c int64) {
		if got, want := cents(c), bidgate.FormatMoney(bidgate.FromCents(c)); got != want {
			t.Errorf("cents(%d) = %q, want %q", c, got, want)
		}
	}
	for c := int64(-1000); c <= 100_000; c++ {
		check(c)
	}
	for _, c := range []int64{hotStartCents + incCents*10_000_000, 99_999_999_999_999, math.MaxInt64, math.MinInt64 + 1} {
		check(c)
	}
}

func TestAppendUUID(t *testing.T) {
	for i := range 1000 {
		u := uuid.New()
		if i == 0 {
			u = uuid.UUID{}
		}
		prefix := []byte(fmt.Sprint(i))
		if got := string(appendUUID(prefix, u)); got != string(prefix)+u.String() {
			t.Fatalf("appendUUID = %q, want %q", got, string(prefix)+u.String())
		}
	}
}

// TestLeakedMaximumInAnyForm: a maxAmount an answer carries is recorded
// whatever its JSON type, so that the audit sees a leak the service wrote
// as a number too.
func TestLeakedMaximumInAnyForm(t *testing.T) {
	for body, want := range map[string]string{
		`{"maxAmount":"1500.00"}`:      "1500.00",
		`{"maxAmount":1500}`:           "1500",
		`{"maxAmount":{"amount":"1"}}`: `{"amount":"1"}`,
		`{"maxAmount":null}`:           "",
	} {
		var d answerDecoder
		var a bidAnswer
		if err := d.decode([]byte(body), &a); err != nil || a.MaxAmount != want {
			t.Errorf("%s: maxAmount %q (%v), want %q", body, a.MaxAmount, err, want)
		}
	}
}

// TestRefusalsAreNotErrors: whatever a 409's code (a leader bidding again
// included), it is a refusal, counted as decided and never as an error.
func TestRefusalsAreNotErrors(t *testing.T) {
	var rec Recorder
	for _, code := range []string{"bid_too_low", "auction_closed", "already_leading", "max_not_raised", "buy_now_unavailable"} {
		o := classify(409)
		if o != Conflict || o.IsError() {
			t.Fatalf("409 %s classified %s (error %v)", code, o, o.IsError())
		}
		rec.add(Record{Status: 409, Code: code, Outcome: o})
	}
	if n := rec.errors.Load(); n != 0 {
		t.Errorf("%d refusals counted as errors", n)
	}
}

// TestRequestBodies: a job's body is a straight bid's amount, a proxy
// bid's maxAmount, or only the bidder for a buy-now, as the API takes them.
func TestRequestBodies(t *testing.T) {
	for _, tc := range []struct {
		job  Job
		want string
	}{
		{Job{BidderID: 7, Amount: "101.00"}, `{"bidderId":7,"amount":"101.00"}`},
		{Job{BidderID: 7, MaxAmount: "150.00"}, `{"bidderId":7,"maxAmount":"150.00"}`},
		{Job{BidderID: 7, BuyNow: true}, `{"bidderId":7}`},
	} {
		got := appendBody([]byte("x"), &tc.job)
		if string(got) != "x"+tc.want || !json.Valid(got[1:]) {
			t.Errorf("body of %+v = %s, want %s", tc.job, got[1:], tc.want)
		}
	}
}
