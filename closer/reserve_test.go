package closer

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"bidgate"
)

// TestReserveAtClose: an auction that ends below its hidden reserve closes
// with no winner (winnerId null, reserveMet false in the event); one that
// reaches it names its winner (reserveMet true); the reserve itself is in
// no event, nor in a notice. Cold and hot.
func TestReserveAtClose(t *testing.T) {
	e := newEnv(t, 4, Config{})
	for _, hot := range []bool{false, true} {
		for _, tc := range []struct {
			name   string
			bids   []string
			met    bool
			winner *int64
			price  string
			nBids  int64
			// notices is what the close tells whom, "type:user" sorted
			// (the seller is 9000007).
			notices []string
		}{
			{name: "below the reserve", bids: []string{"120", "150"}, met: false, price: "150.00", nBids: 2,
				notices: []string{"lost:1", "lost:2", "unsold:9000007"}},
			{name: "at the reserve", bids: []string{"120", "180"}, met: true, winner: ptr(2), price: "180.00", nBids: 2,
				notices: []string{"lost:1", "sold:9000007", "won:2"}},
			{name: "no bid", met: false, price: "100.00", notices: []string{"unsold:9000007"}},
		} {
			name := map[bool]string{false: "cold", true: "hot"}[hot] + ": " + tc.name
			t.Run(name, func(t *testing.T) {
				a := e.create(t, bidgate.NewAuction{
					SellerID: 9_000_007, Title: "reserve lot", StartPrice: decimal.NewFromInt(100),
					MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: hot,
					ReservePrice: decimal.NullDecimal{Decimal: decimal.NewFromInt(180), Valid: true},
				})
				for i, amount := range tc.bids {
					e.bid(t, a.ID, int64(i+1), amount)
				}
				if hot {
					e.setRedisEnd(t, a.ID, -time.Second)
				}
				e.endInPostgres(t, a.ID)
				if _, err := e.closer.CloseDue(ctx); err != nil {
					t.Fatal(err)
				}
				events := readOutbox(t, e.db, `aggregate_id = $1`, a.ID)
				if len(events) != 1 {
					t.Fatalf("%d outbox rows, want 1", len(events))
				}
				ev := events[0].event
				if ev.ReserveMet == nil || *ev.ReserveMet != tc.met || !equalLeader(ev.WinnerID, tc.winner) ||
					ev.FinalPrice != tc.price || ev.BidCount != tc.nBids {
					t.Fatalf("event %s; want reserveMet %v, winner %v, price %s", events[0].payload, tc.met, fmtLeader(tc.winner), tc.price)
				}
				if got := noticesOf(t, e.db, a.ID); !slices.Equal(got, tc.notices) {
					t.Fatalf("notices %v, want %v", got, tc.notices)
				}
				// The reserve (180) shows only as the price that met it.
				var fields map[string]any
				if err := json.Unmarshal(events[0].payload, &fields); err != nil {
					t.Fatal(err)
				}
				for k, v := range fields {
					if s := fmt.Sprint(v); k == "reservePrice" || !tc.met && (s == "180" || s == "180.00") {
						t.Fatalf("the event shows the reserve: %s", events[0].payload)
					}
				}
			})
		}
	}
}
