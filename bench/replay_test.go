package bench

import (
	"fmt"
	"testing"

	"bidgate"
)

// TestReplayFollowsTheRules replays histories the service's own tests
// record (gateway TestProxyWorkedExample and TestBidRules, docs/api.md's
// worked example) and a few more, and wants no fault and the rules' final
// state and answers.
func TestReplayFollowsTheRules(t *testing.T) {
	type row struct {
		bidder      int64
		amount      string
		kind        string
		max         string
		leading     bool   // the answer's, for a bid's own row
		price       string // the answer's currentPrice, for a bid's own row
		answersPrev bool   // an automatic row: answers the row before it
	}
	const x, y, z = 101, 102, 103
	bid := func(bidder int64, amount, kind, max string, leading bool, price string) row {
		return row{bidder: bidder, amount: amount, kind: kind, max: max, leading: leading, price: price}
	}
	auto := func(bidder int64, amount string) row {
		return row{bidder: bidder, amount: amount, kind: rowAuto, answersPrev: true}
	}
	workedExample := func(zAt string) []row {
		return []row{
			bid(x, "1010.00", rowProxy, "1500.00", true, "1010.00"),
			bid(y, "1200.00", rowStraight, "", false, "1210.00"), auto(x, "1210.00"),
			bid(y, "1500.00", rowProxy, "1500.00", false, "1500.00"), auto(x, "1500.00"), // a tie: the earlier maximum
			bid(z, zAt, rowProxy, "2000.00", true, zAt),
		}
	}
	for _, tc := range []struct {
		name                   string
		start, inc             string
		reserve, buyNow        string
		rows                   []row
		leader                 int64
		price, lmax            string
		winner                 int64
		reserveMet, hasReserve bool
		bought                 bool
	}{
		{name: "no bids", start: "1000", inc: "10", price: "1000.00", lmax: "0"},
		{name: "worked example", start: "1000", inc: "10", rows: workedExample("1510.00"),
			leader: z, price: "1510.00", lmax: "2000.00", winner: z},
		{name: "worked example, reserve 1800", start: "1000", inc: "10", reserve: "1800", rows: workedExample("1800.00"),
			leader: z, price: "1800.00", lmax: "2000.00", winner: z, reserveMet: true, hasReserve: true},
		{name: "gateway TestBidRules", start: "1000", inc: "10", rows: []row{
			bid(x, "1010.00", rowProxy, "1300.00", true, "1010.00"),
			bid(x, "1010.00", rowProxy, "1400.00", true, "1010.00"), // rule 1: a raise leaves the price
			bid(y, "1395.00", rowStraight, "", false, "1400.00"), auto(x, "1400.00"),
			bid(y, "1450.00", rowStraight, "", true, "1450.00"),     // rule 2: above the maximum
			bid(x, "1460.00", rowProxy, "2000.00", true, "1460.00"), // rule 2: a proxy over a straight leader
		}, leader: x, price: "1460.00", lmax: "2000.00", winner: x},
		{name: "a raise reaching the reserve lifts the price to it", start: "100", inc: "1", reserve: "150", rows: []row{
			bid(x, "101.00", rowProxy, "120.00", true, "101.00"),
			bid(x, "150.00", rowProxy, "200.00", true, "150.00"),
		}, leader: x, price: "150.00", lmax: "200.00", winner: x, reserveMet: true, hasReserve: true},
		{name: "an answer lifted to the reserve", start: "100", inc: "1", reserve: "150", rows: []row{
			bid(x, "150.00", rowProxy, "200.00", true, "150.00"), // start + inc, lifted
			bid(y, "151.00", rowStraight, "", false, "152.00"), auto(x, "152.00"),
		}, leader: x, price: "152.00", lmax: "200.00", winner: x, reserveMet: true, hasReserve: true},
		{name: "ended below the reserve: nobody wins", start: "100", inc: "1", reserve: "150", rows: []row{
			bid(x, "120.00", rowStraight, "", true, "120.00"),
			bid(y, "121.00", rowProxy, "140.00", true, "121.00"), // min(140, 120 + 1): a straight bid's maximum is its amount
		}, leader: y, price: "121.00", lmax: "140.00", hasReserve: true},
		{name: "bought", start: "100", inc: "1", buyNow: "500", rows: []row{
			bid(z, "500.00", rowBuyNow, "", true, "500.00"),
		}, leader: z, price: "500.00", lmax: "500.00", winner: z, bought: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := AuctionSpec{ID: 1, StartPrice: tc.start, MinIncrement: tc.inc, ReservePrice: tc.reserve, BuyNowPrice: tc.buyNow}
			var rows []BidRow
			for i, r := range tc.rows {
				b := BidRow{AuctionID: 1, BidderID: r.bidder, Amount: r.amount, Kind: r.kind, MaxAmount: r.max,
					RequestID: key(i + 1), Seq: int64(i + 1)}
				if r.answersPrev {
					b.RequestID = bidgate.AutomaticRequestID(rows[i-1].RequestID)
				}
				rows = append(rows, b)
			}
			rp := replayAuction(s, rows)
			for _, f := range rp.faults {
				t.Errorf("fault: %s", f)
			}
			met, has := rp.reserveMet()
			got := fmt.Sprint(rp.leader, rp.price.StringFixed(2), rp.lmax.String(), rp.winner(), met, has, rp.bought)
			want := fmt.Sprint(tc.leader, tc.price, money(tc.lmax).String(), tc.winner, tc.reserveMet, tc.hasReserve, tc.bought)
			if got != want {
				t.Errorf("leader price lmax winner reserveMet hasReserve bought = %s, want %s", got, want)
			}
			for i, r := range tc.rows {
				if r.answersPrev {
					continue
				}
				d, ok := rp.decided[rows[i].RequestID]
				if !ok || d.leading != r.leading || d.price.StringFixed(2) != r.price {
					t.Errorf("seq %d: decided %+v (%v), want leading %v at %s", i+1, d, ok, r.leading, r.price)
				}
			}
		})
	}
}
