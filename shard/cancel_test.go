package shard

import (
	"errors"
	"sync"
	"testing"
	"time"

	"bidgate"
	"bidgate/internal/testdb"
)

// TestCancelRacesFirstBid: a seller's cancel and a first bid sent at once
// never both succeed, on either path, and the auction ends up in the state
// of the one that did (20 runs each).
func TestCancelRacesFirstBid(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{RateLimit: -1, PromoteRate: -1})
	const seller = 9_000_007
	for _, hot := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "hot"}[hot]
		t.Run(name, func(t *testing.T) {
			wins := map[string]int{}
			for range 20 {
				var a bidgate.Auction
				if hot {
					a = newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
				} else {
					a = newAuction(t, s, "100", "1", time.Hour, 0, time.Second)
				}
				var wg sync.WaitGroup
				var cancelErr, bidErr error
				start := make(chan struct{})
				wg.Go(func() { <-start; _, cancelErr = s.Cancel(ctx, a.ID, seller) })
				wg.Go(func() { <-start; _, bidErr = s.PlaceBid(ctx, bid(a.ID, 1, "101")) })
				close(start)
				wg.Wait()
				got, err := s.Auction(ctx, a.ID)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case cancelErr == nil && errors.Is(bidErr, bidgate.ErrAuctionClosed):
					wins["cancel"]++
					if got.Status != bidgate.StatusCancelled || got.BidCount != 0 {
						t.Fatalf("cancel won, auction %+v", got)
					}
				case bidErr == nil && errors.Is(cancelErr, bidgate.ErrHasBids):
					wins["bid"]++
					if got.Status != bidgate.StatusOpen || got.BidCount != 1 {
						t.Fatalf("bid won, auction %+v", got)
					}
				default:
					t.Fatalf("cancel: %v, bid: %v; auction %+v", cancelErr, bidErr, got)
				}
			}
			t.Logf("%s: %v", name, wins)
		})
	}
}
