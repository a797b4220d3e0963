package closer

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"bidgate"
)

// TestHotBuyNowSettles: a buy-now closes a hot auction in Redis and moves
// its row's end back, so the next pass of the closer settles it with the
// buyer as winner at the buy-now price, writing the buy-now row to
// PostgreSQL first, with no wait for its original end.
func TestHotBuyNowSettles(t *testing.T) {
	e := newEnv(t, 4, Config{})
	a, err := e.shards.CreateAuction(ctx, bidgate.NewAuction{
		SellerID: 9_000_007, Title: "buy-now lot", StartPrice: decimal.NewFromInt(100),
		MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: true,
		BuyNowPrice: decimal.NewNullDecimal(decimal.NewFromInt(250)),
	})
	if err != nil {
		t.Fatal(err)
	}
	const buyer = 5
	if _, err := e.shards.PlaceBid(ctx, bidgate.BidRequest{AuctionID: a.ID, BidderID: buyer, BuyNow: true, RequestID: uuid.New()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.closer.CloseDue(ctx); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, e.db, a.ID, ptr(buyer), "250.00", 1)
	if n := count(t, e.db, `SELECT count(*) FROM bid WHERE auction_id = $1 AND kind = 'buy_now' AND seq = 1 AND bidder_id = $2`, a.ID, buyer); n != 1 {
		t.Fatalf("%d buy-now rows in PostgreSQL", n)
	}
}
