package shard

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

func newBuyNowAuction(t *testing.T, s *Service, hot bool, price string) bidgate.Auction {
	t.Helper()
	a, err := s.CreateAuction(ctx, bidgate.NewAuction{
		SellerID: 9_000_007, Title: "buy-now lot", StartPrice: decimal.NewFromInt(100),
		MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: hot,
		BuyNowPrice: decimal.NewNullDecimal(decimal.RequireFromString(price)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestBuyNowRacesFirstBids: a buy-now sent with 50 first bids at once
// either wins, and every bid is refused as closed, or loses to a bid that
// was accepted first, and is refused as unavailable; never both, on either
// path (20 runs each).
func TestBuyNowRacesFirstBids(t *testing.T) {
	db, _ := testdb.New(t, 16)
	s := newService(t, db, Config{RateLimit: -1, PromoteRate: -1})
	const buyer = 77
	for _, hot := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "hot"}[hot]
		t.Run(name, func(t *testing.T) {
			wins := map[string]int{}
			for range 20 {
				a := newBuyNowAuction(t, s, hot, "1000")
				var wg sync.WaitGroup
				var buyErr error
				bidErrs := make([]error, 50)
				start := make(chan struct{})
				wg.Go(func() {
					<-start
					_, buyErr = s.PlaceBid(ctx, bidgate.BidRequest{AuctionID: a.ID, BidderID: buyer, BuyNow: true, RequestID: uuid.New()})
				})
				for i := range bidErrs {
					wg.Go(func() {
						<-start
						r := bid(a.ID, int64(i+1), decimal.NewFromInt(101+int64(i)).String())
						r.Proxy = i%3 == 0
						_, bidErrs[i] = s.PlaceBid(ctx, r)
					})
				}
				close(start)
				wg.Wait()
				got, err := s.Auction(ctx, a.ID)
				if err != nil {
					t.Fatal(err)
				}
				accepted := 0
				for _, err := range bidErrs {
					switch {
					case err == nil:
						accepted++
					case errors.Is(err, bidgate.ErrAuctionClosed), errors.Is(err, bidgate.ErrBidTooLow),
						errors.Is(err, bidgate.ErrAlreadyLeading), errors.Is(err, bidgate.ErrMaxNotRaised):
					default:
						t.Fatalf("bid: %v", err)
					}
				}
				switch {
				case buyErr == nil:
					wins["buy-now"]++
					if accepted != 0 || got.Status != bidgate.StatusClosed || got.LeaderID != buyer || got.BidCount != 1 ||
						!got.CurrentPrice.Equal(decimal.NewFromInt(1000)) {
						t.Fatalf("buy-now won with %d bids accepted; auction %+v", accepted, got)
					}
				case errors.Is(buyErr, bidgate.ErrBuyNowUnavailable):
					wins["bids"]++
					if accepted == 0 || got.Status != bidgate.StatusOpen || got.LeaderID == buyer {
						t.Fatalf("bids won with %d accepted; auction %+v", accepted, got)
					}
				default:
					t.Fatalf("buy-now: %v; auction %+v", buyErr, got)
				}
			}
			t.Logf("%s: %v", name, wins)
		})
	}
}

// TestProxyStorm is the design document's storm with every bidder leaving a
// proxy maximum: 200 bidders at the same instant, each with its own
// maximum. Whatever the order, the highest maximum leads at the lower of
// itself and the second highest accepted maximum plus the increment.
func TestProxyStorm(t *testing.T) {
	db, _ := testdb.New(t, 16)
	s := newService(t, db, Config{RateLimit: -1, PromoteRate: -1})
	for _, hot := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "hot"}[hot]
		t.Run(name, func(t *testing.T) {
			var a bidgate.Auction
			if hot {
				a = newHotAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
			} else {
				a = newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
			}
			maxima := rand.Perm(1000)[:200] // distinct: no ties
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				accepted []int64 // cents
			)
			start := make(chan struct{})
			for i, m := range maxima {
				wg.Go(func() {
					<-start
					cents := int64(101_000 + 500*m) // 1010.00 and up, in steps of 5.00
					r := bid(a.ID, int64(i+1), bidgate.FromCents(cents).String())
					r.Proxy = true
					res, err := s.PlaceBid(ctx, r)
					switch {
					case err == nil:
						mu.Lock()
						accepted = append(accepted, cents)
						mu.Unlock()
						if res.Bid.MaxAmount.Decimal.Cmp(r.Amount) != 0 {
							t.Errorf("bidder %d's answer carries maximum %v", r.BidderID, res.Bid.MaxAmount)
						}
					case !errors.Is(err, bidgate.ErrBidTooLow):
						t.Errorf("bid: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
			slices.Sort(accepted)
			n := len(accepted)
			if n < 2 {
				t.Fatalf("%d proxies accepted", n)
			}
			top, second := accepted[n-1], accepted[n-2]
			want := bidgate.FromCents(min(top, second+1000))
			got, err := s.Auction(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			winner := int64(slices.Index(maxima, int((top-101_000)/500)) + 1)
			if got.LeaderID != winner || !got.CurrentPrice.Equal(want) {
				t.Fatalf("leader %d at %s; want %d at %s (%d proxies accepted)", got.LeaderID, got.CurrentPrice, winner, want, n)
			}
			t.Logf("%s: %d of 200 proxies accepted, %d rows", name, n, got.BidCount)
		})
	}
}

// TestPromotionCopiesTheHiddenMaximum: a cold auction's proxy leader keeps
// their maximum across a promotion: a challenger below it is answered on
// the hot path as on the cold one.
func TestPromotionCopiesTheHiddenMaximum(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{RateLimit: -1, PromoteRate: -1})
	a := newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
	proxy := bid(a.ID, 1, "1500")
	proxy.Proxy = true
	if res, err := s.PlaceBid(ctx, proxy); err != nil || !res.CurrentPrice.Equal(decimal.NewFromInt(1010)) {
		t.Fatalf("proxy: %+v, %v", res, err)
	}
	if _, err := s.Promote(ctx, a.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	res, err := s.PlaceBid(ctx, bid(a.ID, 2, "1400"))
	if err != nil || res.Leading || !res.CurrentPrice.Equal(decimal.NewFromInt(1410)) || res.Bid.Seq != 2 {
		t.Fatalf("after the promotion: %+v, %v", res, err)
	}
	if res, err = s.PlaceBid(ctx, bid(a.ID, 2, "1600")); err != nil || !res.Leading || res.Bid.Seq != 4 {
		t.Fatalf("above the maximum: %+v, %v", res, err)
	}
	got, err := s.Auction(ctx, a.ID)
	if err != nil || got.Mode != bidgate.ModeHot || got.LeaderID != 2 || !got.CurrentPrice.Equal(decimal.NewFromInt(1600)) {
		t.Fatalf("auction %+v, %v", got, err)
	}
}

// TestLostRedisStateKeepsTheHiddenMaximum: a hot auction whose Redis state
// is lost is loaded again from the rows PostgreSQL holds, the leader's
// maximum derived from their own rows.
func TestLostRedisStateKeepsTheHiddenMaximum(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{RateLimit: -1, PromoteRate: -1})
	a := newHotAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
	for _, r := range []bidgate.BidRequest{bid(a.ID, 1, "1500"), bid(a.ID, 2, "1200"), bid(a.ID, 1, "1700")} {
		r.Proxy = r.BidderID == 1
		if _, err := s.PlaceBid(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	log, err := s.rs.ReadLog(ctx, a.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.WriteHotBids(ctx, tx, log, pgstore.StoreOutbidNotices); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.rs.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	res, err := s.PlaceBid(ctx, bid(a.ID, 3, "1650"))
	if err != nil || res.Leading || !res.CurrentPrice.Equal(decimal.NewFromInt(1660)) || res.Bid.Seq != 5 {
		t.Fatalf("a bid under the maximum after the reload: %+v, %v", res, err)
	}
}
