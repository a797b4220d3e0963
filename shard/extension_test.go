package shard

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
)

// TestExtensionCap: anti-sniping moves the end to at most maxEndTime, on
// both paths; a cap further away than the extension changes nothing.
func TestExtensionCap(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{})
	for _, hot := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "hot"}[hot]
		create := func(t *testing.T, capAfterEnd time.Duration) bidgate.Auction {
			t.Helper()
			end := time.Now().Add(5 * time.Second).Truncate(time.Microsecond)
			a, err := s.CreateAuction(ctx, bidgate.NewAuction{
				SellerID: 9_000_007, Title: "capped lot", StartPrice: decimal.NewFromInt(100),
				MinIncrement: decimal.NewFromInt(1), EndTime: end, Hot: hot,
				ExtendWindow: 10 * time.Second, ExtendBy: 30 * time.Second, MaxEndTime: end.Add(capAfterEnd),
			})
			if err != nil {
				t.Fatal(err)
			}
			if !a.MaxEndTime.Equal(end.Add(capAfterEnd)) {
				t.Fatalf("created with maxEndTime %v, want %v", a.MaxEndTime, end.Add(capAfterEnd))
			}
			return a
		}
		t.Run(name+": the end stops at the cap", func(t *testing.T) {
			a := create(t, 8*time.Second)
			for i, amount := range []string{"101", "102", "103"} {
				res, err := s.PlaceBid(ctx, bid(a.ID, int64(i+1), amount))
				if err != nil {
					t.Fatal(err)
				}
				if !res.Bid.EndTime.Equal(a.MaxEndTime) {
					t.Fatalf("bid %d: end %v, want the cap %v (original end %v)", i+1, res.Bid.EndTime, a.MaxEndTime, a.EndTime)
				}
			}
			got, err := s.Auction(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.EndTime.Equal(a.MaxEndTime) || !got.MaxEndTime.Equal(a.MaxEndTime) {
				t.Fatalf("auction ends %v, cap %v; want both %v", got.EndTime, got.MaxEndTime, a.MaxEndTime)
			}
		})
		t.Run(name+": a cap beyond the extension changes nothing", func(t *testing.T) {
			a := create(t, time.Hour)
			res, err := s.PlaceBid(ctx, bid(a.ID, 1, "101"))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Bid.EndTime.Sub(res.Bid.AcceptedAt); got < 30*time.Second-time.Millisecond || got > 30*time.Second {
				t.Fatalf("end is %v after acceptance, want 30s", got)
			}
		})
	}
}

func TestMaxEndTimeValidation(t *testing.T) {
	end := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name string
		max  time.Time
		ok   bool
	}{
		{"none", time.Time{}, true},
		{"after the end", end.Add(time.Minute), true},
		{"at the end", end, false},
		{"before the end", end.Add(-time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := bidgate.NewAuction{SellerID: 1, Title: "x", StartPrice: decimal.NewFromInt(1), MinIncrement: decimal.NewFromInt(1),
				EndTime: end, ExtendBy: time.Second, MaxEndTime: tc.max}
			if err := n.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}
