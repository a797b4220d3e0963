package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"bidgate"
)

// An answer is encoded once per ETag: the same version is the same bytes, a
// new version (or another auction in the same slot) is encoded afresh.
func TestRenderedAnswers(t *testing.T) {
	var r rendered
	auction := func(id, seq int64, price string) bidgate.Auction {
		return bidgate.Auction{ID: id, SellerID: 7, Title: "lot", StartPrice: decimal.RequireFromString("100"),
			CurrentPrice: decimal.RequireFromString(price), MinIncrement: decimal.RequireFromString("1"),
			Status: bidgate.StatusOpen, Mode: bidgate.ModeCold, BidCount: seq, EndTime: time.Unix(2_000_000_000, 0)}
	}
	price := func(b []byte) string {
		var v struct {
			ID           int64  `json:"id"`
			CurrentPrice string `json:"currentPrice"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v.CurrentPrice
	}
	for _, step := range []struct {
		name      string
		a         bidgate.Auction
		wantPrice string
		wantSame  bool // the bytes of the previous step
	}{
		{"first read", auction(5, 0, "100"), "100.00", false},
		{"same version", auction(5, 0, "100"), "100.00", true},
		{"a bid moved it", auction(5, 1, "150"), "150.00", false},
		{"another auction in the slot", auction(5+renderedSlots, 1, "900"), "900.00", false},
		{"the first again", auction(5, 1, "150"), "150.00", false},
	} {
		prev := r.slots[5].Load()
		b := r.body(step.a, etag(step.a), false)
		if got := price(b); got != step.wantPrice {
			t.Fatalf("%s: price %s, want %s", step.name, got, step.wantPrice)
		}
		if same := prev != nil && &prev.body[0] == &b[0]; same != step.wantSame {
			t.Fatalf("%s: reused the kept bytes %v, want %v", step.name, same, step.wantSame)
		}
	}
}
