package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

var ctx = context.Background()

// newService is a Service on db and the test Redis. The rate limit is off
// unless cfg sets it: these tests send many bids per bidder on purpose. So
// is the store budget, nearly, and the cold bid's wait for the row lock:
// their storms of hundreds of bids at once queue for a test-sized pool and
// for one row, under the race detector.
func newService(t *testing.T, db *pgxpool.Pool, cfg Config) *Service {
	t.Helper()
	return newServiceOn(t, db, cfg, prometheus.NewRegistry())
}

// newServiceOn is newService with its metrics on reg.
func newServiceOn(t *testing.T, db *pgxpool.Pool, cfg Config, reg prometheus.Registerer) *Service {
	t.Helper()
	if cfg.StoreTimeout == 0 {
		cfg.StoreTimeout, cfg.ColdLockTimeout = time.Minute, cmp.Or(cfg.ColdLockTimeout, 30*time.Second)
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1
	}
	if cfg.PromoteRate == 0 {
		cfg.PromoteRate = -1
	}
	return New(db, testredis.Client(t), cfg, reg)
}

func newAuction(t *testing.T, s *Service, start, inc string, d time.Duration, window, by time.Duration) bidgate.Auction {
	t.Helper()
	a, err := s.CreateAuction(ctx, bidgate.NewAuction{
		SellerID: 9_000_007, Title: "test lot", StartPrice: decimal.RequireFromString(start),
		MinIncrement: decimal.RequireFromString(inc), EndTime: time.Now().Add(d),
		ExtendWindow: window, ExtendBy: by,
	})
	if err != nil {
		t.Fatalf("create auction: %v", err)
	}
	return a
}

func bid(auction, bidder int64, amount string) bidgate.BidRequest {
	return bidgate.BidRequest{AuctionID: auction, BidderID: bidder,
		Amount: decimal.RequireFromString(amount), RequestID: uuid.New()}
}

type placeFunc func(context.Context, bidgate.BidRequest) (bidgate.BidResult, error)

// storm is the design document's test: 200 bidders bid 1000+10*i on one
// auction (start 1000, increment 10) at the same instant.
func storm(t *testing.T, place placeFunc, auction int64) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 200)
	for i := int64(1); i <= 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := bid(auction, i, decimal.NewFromInt(1000+10*i).String())
			if _, err := place(ctx, r); err != nil && !errors.Is(err, bidgate.ErrBidTooLow) && !errors.Is(err, bidgate.ErrAlreadyLeading) {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected error: %v", err)
	}
}

type finalState struct {
	price, maxBid decimal.Decimal
	leader        int64
}

func readFinal(t *testing.T, db *pgxpool.Pool, auction int64) finalState {
	t.Helper()
	var f finalState
	err := db.QueryRow(ctx, `SELECT a.current_price, COALESCE(a.leader_id, 0), (SELECT MAX(amount) FROM bid WHERE auction_id = a.id)
		FROM auction a WHERE a.id = $1`, auction).Scan(&f.price, &f.leader, &f.maxBid)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestConcurrentBidsNeverLoseTheHighest(t *testing.T) {
	db, _ := testdb.New(t, 20)
	s := newService(t, db, Config{})
	for run := 0; run < 20; run++ {
		a := newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
		storm(t, s.PlaceBid, a.ID)
		f := readFinal(t, db, a.ID)
		if !f.price.Equal(decimal.NewFromInt(3000)) || f.leader != 200 || !f.maxBid.Equal(f.price) {
			t.Fatalf("run %d: price %s leader %d max bid %s; want 3000, 200, 3000", run, f.price, f.leader, f.maxBid)
		}
		checkHistory(t, db, a.ID)
	}
}

// checkHistory asserts invariant 4: in acceptance order, every accepted
// amount beats the one before by at least the increment.
func checkHistory(t *testing.T, db *pgxpool.Pool, auction int64) {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT b.seq, b.amount, a.min_increment, a.bid_count FROM bid b JOIN auction a ON a.id = b.auction_id
		WHERE b.auction_id = $1 ORDER BY b.seq`, auction)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prev decimal.Decimal
	var n int64
	for rows.Next() {
		var seq, count int64
		var amount, inc decimal.Decimal
		if err := rows.Scan(&seq, &amount, &inc, &count); err != nil {
			t.Fatal(err)
		}
		n++
		if seq != n || count < n {
			t.Fatalf("bid seq %d at position %d (bid_count %d)", seq, n, count)
		}
		if n > 1 && amount.LessThan(prev.Add(inc)) {
			t.Fatalf("bid %d amount %s does not beat %s by %s", seq, amount, prev, inc)
		}
		prev = amount
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// naivePlaceBid is the design document's classic mistake, read then write,
// kept to prove that the storm test catches lost updates.
func naivePlaceBid(db *pgxpool.Pool) placeFunc {
	return func(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
		var price, inc decimal.Decimal
		if err := db.QueryRow(ctx, `SELECT current_price, min_increment FROM auction WHERE id = $1`, r.AuctionID).Scan(&price, &inc); err != nil {
			return bidgate.BidResult{}, err
		}
		if r.Amount.LessThan(price.Add(inc)) {
			return bidgate.BidResult{}, bidgate.ErrBidTooLow
		}
		_, err := db.Exec(ctx, `UPDATE auction SET current_price = $2, leader_id = $3 WHERE id = $1`, r.AuctionID, r.Amount, r.BidderID)
		if err != nil {
			return bidgate.BidResult{}, err
		}
		_, err = db.Exec(ctx, `INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
			VALUES ($1, $2, $3, $4, 0, clock_timestamp(), clock_timestamp())`, r.AuctionID, r.BidderID, r.Amount, r.RequestID)
		return bidgate.BidResult{}, err
	}
}

func TestNaiveReadThenWriteLosesUpdates(t *testing.T) {
	db, _ := testdb.New(t, 20)
	s := newService(t, db, Config{})
	lost := 0
	for run := 0; run < 20; run++ {
		a := newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
		storm(t, naivePlaceBid(db), a.ID)
		if f := readFinal(t, db, a.ID); !f.price.Equal(decimal.NewFromInt(3000)) || f.leader != 200 {
			lost++
		}
	}
	t.Logf("naive read-then-write lost the highest bid in %d of 20 runs", lost)
	if lost == 0 {
		t.Fatal("the naive version never lost an update: the storm test would not catch the bug")
	}
}

func TestIdempotencyUnderConcurrency(t *testing.T) {
	db, _ := testdb.New(t, 20)
	s := newService(t, db, Config{})
	a := newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
	r := bid(a.ID, 42, "1250")

	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]bidgate.BidResult, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = s.PlaceBid(ctx, r)
		}()
	}
	close(start)
	wg.Wait()

	fresh := 0
	for i := range 50 {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if !results[i].Replayed {
			fresh++
		}
		if !sameBid(results[i].Bid, results[0].Bid) {
			t.Fatalf("request %d got %+v, request 0 got %+v", i, results[i].Bid, results[0].Bid)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d requests created a bid, want exactly 1", fresh)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM bid WHERE auction_id = $1`, a.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("%d bid rows, want 1", rows)
	}

	other := r
	other.Amount = decimal.NewFromInt(1300)
	if _, err := s.PlaceBid(ctx, other); !errors.Is(err, bidgate.ErrIdempotencyKeyReused) {
		t.Fatalf("same key, other amount: %v, want ErrIdempotencyKeyReused", err)
	}
}

// A key reused with a higher amount races its first use: both pass the
// look-up, the second's UPDATE succeeds on the new price, and its INSERT
// meets the unique constraint, which must undo the UPDATE.
func TestReusedKeyRaceUndoesThePriceChange(t *testing.T) {
	db, _ := testdb.New(t, 20)
	s := newService(t, db, Config{})
	for run := 0; run < 20; run++ {
		a := newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
		first := bid(a.ID, 1, "1100")
		second := first
		second.Amount = decimal.NewFromInt(1200)

		var wg sync.WaitGroup
		start := make(chan struct{})
		var errFirst, errSecond error
		wg.Add(2)
		go func() { defer wg.Done(); <-start; _, errFirst = s.PlaceBid(ctx, first) }()
		go func() { defer wg.Done(); <-start; _, errSecond = s.PlaceBid(ctx, second) }()
		close(start)
		wg.Wait()

		// Exactly one wins; the other is told the key is taken.
		if (errFirst == nil) == (errSecond == nil) {
			t.Fatalf("run %d: errors %v and %v; want exactly one to fail", run, errFirst, errSecond)
		}
		for _, err := range []error{errFirst, errSecond} {
			if err != nil && !errors.Is(err, bidgate.ErrIdempotencyKeyReused) {
				t.Fatalf("run %d: %v, want ErrIdempotencyKeyReused", run, err)
			}
		}
		f := readFinal(t, db, a.ID)
		if !f.price.Equal(f.maxBid) {
			t.Fatalf("run %d: price %s but highest bid %s", run, f.price, f.maxBid)
		}
	}
}

func sameBid(a, b bidgate.Bid) bool {
	return a.AuctionID == b.AuctionID && a.BidderID == b.BidderID && a.Amount.Equal(b.Amount) &&
		a.RequestID == b.RequestID && a.Seq == b.Seq && a.AcceptedAt.Equal(b.AcceptedAt) && a.EndTime.Equal(b.EndTime)
}

func TestAntiSniping(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{})

	t.Run("a bid in the window extends the end", func(t *testing.T) {
		a := newAuction(t, s, "100", "1", 5*time.Second, 10*time.Second, 30*time.Second)
		res, err := s.PlaceBid(ctx, bid(a.ID, 1, "101"))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Bid.EndTime.Sub(res.Bid.AcceptedAt); got < 30*time.Second-time.Millisecond || got > 30*time.Second {
			t.Fatalf("end is %v after acceptance, want 30s", got)
		}
		if !res.Bid.EndTime.After(a.EndTime) {
			t.Fatalf("end %v not after the original %v", res.Bid.EndTime, a.EndTime)
		}
	})
	t.Run("a bid outside the window leaves the end alone", func(t *testing.T) {
		a := newAuction(t, s, "100", "1", time.Hour, 10*time.Second, 30*time.Second)
		res, err := s.PlaceBid(ctx, bid(a.ID, 1, "101"))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Bid.EndTime.Equal(a.EndTime) {
			t.Fatalf("end moved from %v to %v", a.EndTime, res.Bid.EndTime)
		}
	})
	t.Run("the extension never shortens the auction", func(t *testing.T) {
		// Window longer than the time left, extension shorter than it.
		a := newAuction(t, s, "100", "1", 20*time.Second, time.Minute, time.Second)
		res, err := s.PlaceBid(ctx, bid(a.ID, 1, "101"))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Bid.EndTime.Equal(a.EndTime) {
			t.Fatalf("end moved from %v to %v", a.EndTime, res.Bid.EndTime)
		}
	})
	t.Run("a bid after the end is refused while the status is still OPEN", func(t *testing.T) {
		a := newAuction(t, s, "100", "1", 1200*time.Millisecond, 0, time.Second)
		testdb.WaitForEnd(t, db, a.ID)
		if _, err := s.PlaceBid(ctx, bid(a.ID, 1, "500")); !errors.Is(err, bidgate.ErrAuctionClosed) {
			t.Fatalf("bid after the end: %v, want ErrAuctionClosed", err)
		}
		got, err := s.Auction(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != bidgate.StatusOpen || got.BidCount != 0 {
			t.Fatalf("auction %+v, want OPEN with no bids", got)
		}
	})
}

func TestBidErrors(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{})
	a := newAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
	if _, err := s.PlaceBid(ctx, bid(a.ID, 1, "1010")); err != nil {
		t.Fatal(err)
	}
	var tooLow *bidgate.BidTooLowError
	if _, err := s.PlaceBid(ctx, bid(a.ID, 2, "1015")); !errors.As(err, &tooLow) {
		t.Fatalf("low bid: %v, want BidTooLowError", err)
	}
	if !tooLow.CurrentPrice.Equal(decimal.NewFromInt(1010)) || !tooLow.MinimumBid.Equal(decimal.NewFromInt(1020)) {
		t.Fatalf("too low reports price %s minimum %s, want 1010 and 1020", tooLow.CurrentPrice, tooLow.MinimumBid)
	}
	if _, err := s.PlaceBid(ctx, bid(a.ID+1000, 2, "1015")); !errors.Is(err, bidgate.ErrAuctionNotFound) {
		t.Fatalf("unknown auction: %v", err)
	}
	var inErr *bidgate.InputError
	if _, err := s.PlaceBid(ctx, bid(a.ID, 2, "0")); !errors.As(err, &inErr) {
		t.Fatalf("zero amount: %v, want InputError", err)
	}
	if _, err := s.CreateAuction(ctx, bidgate.NewAuction{SellerID: 9_000_001, Title: "x", StartPrice: decimal.Zero,
		MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(-time.Minute), ExtendBy: time.Second}); !errors.Is(err, bidgate.ErrEndTimeOutOfRange) {
		t.Fatalf("past end time: %v, want ErrEndTimeOutOfRange", err)
	}
}

// A seller's bid on their own auction is refused, in both paths, before
// anything else is checked, and changes nothing; promotion and a reload of
// the hot state keep the seller.
func TestSelfBidding(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{})
	const seller = 9_000_007
	for _, mode := range []string{"cold", "hot", "promoted", "reloaded"} {
		t.Run(mode, func(t *testing.T) {
			var a bidgate.Auction
			if mode == "hot" || mode == "reloaded" {
				a = newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
			} else {
				a = newAuction(t, s, "100", "1", time.Hour, 0, time.Second)
			}
			if _, err := s.PlaceBid(ctx, bid(a.ID, 1, "101")); err != nil {
				t.Fatal(err)
			}
			switch mode {
			case "promoted":
				if _, err := s.Promote(ctx, a.ID, "test"); err != nil {
					t.Fatal(err)
				}
			case "reloaded":
				if err := s.rdb.Del(ctx, redisstore.KeysOf(a.ID).State).Err(); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(ctx, `UPDATE auction SET current_price = 101, leader_id = 1, bid_count = 1, persisted_seq = 1 WHERE id = $1`, a.ID); err != nil {
					t.Fatal(err)
				}
			}
			for _, amount := range []string{"150", "50"} { // valid and too low: self-bidding comes first
				if _, err := s.PlaceBid(ctx, bid(a.ID, seller, amount)); !errors.Is(err, bidgate.ErrSelfBidding) {
					t.Fatalf("seller bids %s: %v, want %v", amount, err, bidgate.ErrSelfBidding)
				}
			}
			got, err := s.Auction(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.CurrentPrice.Equal(decimal.NewFromInt(101)) || got.LeaderID != 1 || got.BidCount != 1 {
				t.Fatalf("after the seller's bids: price %s leader %d count %d", got.CurrentPrice, got.LeaderID, got.BidCount)
			}
			if _, err := s.PlaceBid(ctx, bid(a.ID, 2, "102")); err != nil {
				t.Fatalf("another bidder: %v", err)
			}
		})
	}
}

// Bids that come while their auction's statement is in PostgreSQL go
// together in the next transaction: one commit (one xmin) for them all,
// each answered as if it came alone, in the order they came. A group that
// fails on a repeated key is placed again one bid a transaction.
func TestWaitingColdBidsGoTogether(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{})
	for _, tc := range []struct {
		name         string
		repeat       int  // the group's bid at this index has the key of the one before (0: none)
		higher       bool // and a higher amount: the group fails on the key
		transactions int  // bid rows' distinct xmin
	}{
		{name: "distinct keys", transactions: 2},
		{name: "a bid twice", repeat: 3, transactions: 2},
		{name: "a key reused", repeat: 3, higher: true, transactions: 1 + 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuction(t, s, "100", "1", time.Hour, time.Minute, time.Minute)
			lock := lockAuction(t, db, a.ID)
			type answer struct {
				res bidgate.BidResult
				err error
			}
			place := func(r bidgate.BidRequest) chan answer {
				c := make(chan answer, 1)
				go func() {
					res, err := s.PlaceBid(ctx, r)
					c <- answer{res, err}
				}()
				return c
			}
			first := place(bid(a.ID, 1, "101"))
			await.NoError(t, 10*time.Second, "the first bid waiting for the row lock", func() error {
				locked, err := lockWaiters(db)
				if err != nil {
					return err
				}
				if locked < 1 {
					return errors.New("no statement waits for a lock")
				}
				return nil
			})
			var group []bidgate.BidRequest
			var answers []chan answer
			for i := range 6 {
				r := bid(a.ID, int64(10+i), decimal.NewFromInt(int64(110+10*i)).String())
				if tc.repeat > 0 && i == tc.repeat {
					r.RequestID = group[i-1].RequestID
					if !tc.higher {
						r = group[i-1]
					}
				}
				group = append(group, r)
				answers = append(answers, place(r))
				await.NoError(t, 10*time.Second, "the bid waiting for its turn", func() error {
					if n := s.cold.turns.Queued(a.ID); n != i+1 {
						return fmt.Errorf("%d bids waiting, want %d", n, i+1)
					}
					return nil
				})
			}
			if err := lock.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if got := <-first; got.err != nil || got.res.Bid.Seq != 1 {
				t.Fatalf("the first bid: %+v, %v", got.res, got.err)
			}
			var seq int64 = 1
			for i, c := range answers {
				got := <-c
				want := bidgate.Bid{AuctionID: a.ID, BidderID: group[i].BidderID, Amount: group[i].Amount, Kind: bidgate.KindStraight, RequestID: group[i].RequestID}
				if tc.repeat > 0 && i == tc.repeat && tc.higher {
					if !errors.Is(got.err, bidgate.ErrIdempotencyKeyReused) {
						t.Fatalf("the reused key: %+v, %v; want ErrIdempotencyKeyReused", got.res, got.err)
					}
					continue
				}
				if got.err != nil {
					t.Fatalf("bid %d: %v", i, got.err)
				}
				if tc.repeat > 0 && i == tc.repeat {
					if !got.res.Replayed || got.res.Bid.Seq != seq {
						t.Fatalf("the repeated bid: %+v, want a replay of seq %d", got.res, seq)
					}
					continue
				}
				seq++
				want.Seq = seq
				if got.res.Replayed || !got.res.Leading || !got.res.CurrentPrice.Equal(group[i].Amount) ||
					got.res.Bid.Seq != want.Seq || got.res.Bid.BidderID != want.BidderID || !got.res.Bid.Amount.Equal(want.Amount) {
					t.Fatalf("bid %d: %+v, want %+v leading at its amount", i, got.res, want)
				}
			}
			var rows, transactions int
			if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM bid WHERE auction_id = $1`, a.ID).Scan(&rows, &transactions); err != nil {
				t.Fatal(err)
			}
			if rows != int(seq) || transactions != tc.transactions {
				t.Fatalf("%d bid rows in %d transactions, want %d in %d", rows, transactions, seq, tc.transactions)
			}
			checkHistory(t, db, a.ID)
		})
	}
}
