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
		Seq        int64     `json:"seq"`
		AcceptedAt time.Time `json:"acceptedAt"`
		EndTime    time.Time `json:"endTime"`
		Code       string    `json:"code"`
	}
	bodies := []struct {
		name, body string
		ok         bool
	}{
		{"201", `{"auctionId":42,"bidderId":1000001,"amount":"1001.00","requestId":"6f1c2b1e-7f5a-4d2e-9a57-0c1f4f3b2a10",` +
			`"acceptedAt":"2030-01-02T15:04:05.123456Z","endTime":"2030-01-02T16:04:05Z","seq":17}`, true},
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
			if got.Seq != want.Seq || !got.AcceptedAt.Equal(want.AcceptedAt) || !got.EndTime.Equal(want.EndTime) || got.Code != want.Code {
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
