package persist_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/asyncapi"
	"bidgate/persist"
	"bidgate/persist/kafka"
)

// TestRelayedBidsMatchTheContract: every kind of hot bid row (straight,
// proxy, the automatic answer of a proxy, buy-now), as the signed relay puts
// it on a real broker, is a bid-accepted message of the AsyncAPI document:
// key, signature headers and value, with no undocumented field.
func TestRelayedBidsMatchTheContract(t *testing.T) {
	p := newPipeline(t)
	signer, verifier := eventKeys(t, "the relays' event-signing key!!!")
	p.run(p.relay(persist.RelayConfig{Signer: signer}).Run)

	place := func(r bidgate.BidRequest) {
		t.Helper()
		r.RequestID = uuid.New()
		if _, err := p.shard.PlaceBid(context.Background(), r); err != nil {
			t.Fatalf("bid %+v: %v", r, err)
		}
	}
	a := p.auction() // at 1000, rising by 100
	place(bidgate.BidRequest{AuctionID: a.ID, BidderID: 101, Amount: decimal.NewFromInt(1500), Proxy: true})
	place(bidgate.BidRequest{AuctionID: a.ID, BidderID: 102, Amount: decimal.RequireFromString("1200.50")}) // 101's proxy answers
	place(bidgate.BidRequest{AuctionID: a.ID, BidderID: 103, Amount: decimal.NewFromInt(2000), Proxy: true})
	b, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_001, Title: "buy it now",
		StartPrice: decimal.NewFromInt(1000), MinIncrement: decimal.NewFromInt(100), EndTime: time.Now().Add(time.Hour),
		ExtendBy: time.Second, Hot: true, BuyNowPrice: decimal.NullDecimal{Decimal: decimal.NewFromInt(5000), Valid: true}})
	if err != nil {
		t.Fatal(err)
	}
	place(bidgate.BidRequest{AuctionID: b.ID, BidderID: 104, BuyNow: true})

	want := map[string]bool{} // auction/seq of every row the logs hold
	for _, id := range []int64{a.ID, b.ID} {
		live, err := p.shard.Auction(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for seq := int64(1); seq <= live.BidCount; seq++ {
			want[fmt.Sprintf("%d/%d", id, seq)] = true
		}
	}
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidAccepted, "contract", kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kinds := map[bidgate.BidKind]int{}
	for len(want) > 0 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("%d rows not relayed (%v): %v", len(want), want, err)
		}
		if err := asyncapi.ValidateKafka(m); err != nil {
			t.Fatal(err)
		}
		if !verifier.Verify(m) {
			t.Fatalf("bid-accepted message %s: no valid signature", m.Value)
		}
		var bid bidgate.BidAccepted
		if err := json.Unmarshal(m.Value, &bid); err != nil {
			t.Fatal(err)
		}
		if string(m.Key) != fmt.Sprint(bid.AuctionID) {
			t.Fatalf("message with key %s: value %s", m.Key, m.Value)
		}
		if k := fmt.Sprintf("%d/%d", bid.AuctionID, bid.Seq); want[k] {
			delete(want, k)
			kinds[bid.Kind]++
			t.Logf("%s", m.Value)
		}
	}
	for _, k := range []bidgate.BidKind{bidgate.KindStraight, bidgate.KindProxy, bidgate.KindAutomatic, bidgate.KindBuyNow} {
		if kinds[k] == 0 {
			t.Fatalf("no %s row among %v", k, kinds)
		}
	}
}
