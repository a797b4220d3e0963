package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

const historySeller = 9_000_005

func newLot(t *testing.T, s *pgstore.Store, hot bool) bidgate.Auction {
	t.Helper()
	a, err := s.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: historySeller, Title: "lot",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1),
		EndTime: time.Now().Add(time.Hour), ExtendWindow: time.Minute, ExtendBy: time.Minute, Hot: hot})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func coldBid(t *testing.T, s *pgstore.Store, auction, bidder, amount int64, proxy bool) {
	t.Helper()
	r := bidgate.BidRequest{AuctionID: auction, BidderID: bidder, Amount: decimal.NewFromInt(amount), Proxy: proxy, RequestID: uuid.New()}
	if o, err := s.PlaceColdBid(context.Background(), r, 5*time.Second); err != nil || !o.Placed {
		t.Fatalf("cold bid of %d at %d: placed %v, %v", bidder, amount, o.Placed, err)
	}
}

// writeHot writes hot rows as the persister does, bidder i at seq seqs[i].
func writeHot(t *testing.T, db *pgxpool.Pool, auction int64, bidders map[int64]int64) {
	t.Helper()
	var bids []bidgate.BidAccepted
	at := time.Now()
	for seq, bidder := range bidders {
		bids = append(bids, bidgate.BidAccepted{AuctionID: auction, BidderID: bidder,
			Amount: bidgate.FormatMoney(decimal.NewFromInt(200 + seq)), RequestID: uuid.NewString(), Seq: seq,
			AcceptedAt: at, EndTime: at.Add(time.Hour)})
	}
	err := pgx.BeginFunc(context.Background(), db, func(tx pgx.Tx) error {
		_, err := pgstore.WriteHotBids(context.Background(), tx, bids, pgstore.StoreOutbidNotices)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// aliases is the page's rows as "seq:bidder=alias", newest first.
func aliases(page bidgate.HistoryPage) string {
	s := ""
	for _, e := range page.Entries {
		s += fmt.Sprintf("%d:%d=%d ", e.Seq, e.BidderID, e.Alias)
	}
	return s
}

func TestAuctionBidsAliases(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()

	cold := newLot(t, s, false)
	coldBid(t, s, cold.ID, 30, 110, false)
	coldBid(t, s, cold.ID, 10, 120, false)
	coldBid(t, s, cold.ID, 30, 130, false)
	coldBid(t, s, cold.ID, 20, 200, true)  // proxy: one row
	coldBid(t, s, cold.ID, 10, 150, false) // answered by 20's proxy: two rows

	hot := newLot(t, s, true)
	empty := newLot(t, s, false)

	tests := []struct {
		name      string
		auction   int64
		write     map[int64]int64 // hot rows to write first: seq -> bidder
		before    int64
		limit     int
		want      string
		wantMore  bool
		wantError error
	}{
		{name: "cold, newest first, aliases by first bid", auction: cold.ID, limit: 10,
			want: "6:20=3 5:10=2 4:20=3 3:30=1 2:10=2 1:30=1 "},
		{name: "cold, a page", auction: cold.ID, limit: 2, want: "6:20=3 5:10=2 ", wantMore: true},
		{name: "cold, the next page", auction: cold.ID, before: 5, limit: 3, want: "4:20=3 3:30=1 2:10=2 ", wantMore: true},
		{name: "cold, the last page", auction: cold.ID, before: 2, limit: 3, want: "1:30=1 "},
		{name: "no bids yet", auction: empty.ID, limit: 10, want: ""},
		// Hot rows arrive out of order: seq 3 is held back until seq 2
		// arrives, so bidder 8 (first at 3) is never shown as Bidder 2.
		{name: "hot, a gap", auction: hot.ID, write: map[int64]int64{1: 7, 3: 8}, limit: 10, want: "1:7=1 "},
		{name: "hot, the gap closed", auction: hot.ID, write: map[int64]int64{2: 9}, limit: 10, want: "3:8=3 2:9=2 1:7=1 "},
		// An aliased bidder again, and a new one twice in one range.
		{name: "hot, old and new bidders", auction: hot.ID, write: map[int64]int64{4: 7, 5: 10, 6: 10}, limit: 10,
			want: "6:10=4 5:10=4 4:7=1 3:8=3 2:9=2 1:7=1 "},
		{name: "no such auction", auction: 1 << 60, limit: 10, wantError: bidgate.ErrAuctionNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.write != nil {
				writeHot(t, db, tc.auction, tc.write)
			}
			page, err := s.AuctionBids(ctx, tc.auction, tc.before, tc.limit)
			if !errors.Is(err, tc.wantError) {
				t.Fatalf("AuctionBids: %v, want %v", err, tc.wantError)
			}
			if err != nil {
				return
			}
			if got := aliases(page); got != tc.want || page.More != tc.wantMore || page.SellerID != historySeller {
				t.Fatalf("got %q more %v seller %d, want %q more %v", got, page.More, page.SellerID, tc.want, tc.wantMore)
			}
		})
	}

	page, err := s.AuctionBids(ctx, cold.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Entries {
		if (e.Kind == bidgate.KindProxy) != e.MaxAmount.Valid {
			t.Fatalf("row %d (%s): maximum %v", e.Seq, e.Kind, e.MaxAmount)
		}
	}
}

// A hot batch's aliases probe bidder_alias's key once per new row and
// read the persisted range of bids by (auction_id, seq), however many
// aliases and bids the table holds: as a join, the planner hashed the
// whole alias table for every batch.
func TestHotAliasesProbeTheirIndexes(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()
	var ids []int64
	for range 4 {
		ids = append(ids, newLot(t, s, true).ID)
	}
	// 10,000 bids on each of 4 auctions from 20,000 bidders, aliased up to
	// seq 9,950.
	if _, err := db.Exec(ctx, `INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
SELECT a, 1 + (s * 7919) % 20000, 100 + s, gen_random_uuid(), s, now(), now() + interval '1 hour'
  FROM unnest($1::bigint[]) a, generate_series(1, 10000) s`, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO bidder_alias (auction_id, bidder_id, alias)
SELECT auction_id, bidder_id, row_number() OVER (PARTITION BY auction_id ORDER BY min(seq))
  FROM bid WHERE seq <= 9950 GROUP BY auction_id, bidder_id`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "ANALYZE bid, bidder_alias"); err != nil {
		t.Fatal(err)
	}
	n := len(ids)
	from, to := make([]int64, n), make([]int64, n)
	for i := range n {
		from[i], to[i] = 9950, 9962
	}
	plan := strings.Join(explain(t, db, pgstore.AssignAliasesSQL, ids, from, to), "\n")
	for _, bad := range []string{"Seq Scan on bidder_alias", "Hash"} {
		if strings.Contains(plan, bad) {
			t.Fatalf("the aliases' plan has a %s:\n%s", bad, plan)
		}
	}
	for _, want := range []string{"bidder_alias_pkey", "idx_bid_auction_seq"} {
		if !strings.Contains(plan, want) {
			t.Fatalf("the aliases' plan does not use %s:\n%s", want, plan)
		}
	}
}

// The persister's and the reconciler's comparison of a batch with the bid
// table probes the (auction_id, seq) index once per bid, however big the
// batch: as a join, the planner hashed the whole bid table for a
// reconciler's batch of a few hundred.
func TestCompareBidsProbeTheSeqIndex(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()
	a := newLot(t, s, true)
	if _, err := db.Exec(ctx, `INSERT INTO bid (auction_id, bidder_id, amount, request_id, seq, accepted_at, end_time)
SELECT $1, 1 + s % 20000, 100 + s, gen_random_uuid(), s, now(), now() + interval '1 hour' FROM generate_series(1, 40000) s`, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "ANALYZE bid"); err != nil {
		t.Fatal(err)
	}
	const n = 900
	auctions, seqs, bidders := make([]int64, n), make([]int64, n), make([]int64, n)
	requests, amounts, kinds := make([]string, n), make([]string, n), make([]string, n)
	maxima := make([]*string, n)
	for i := range n {
		auctions[i], seqs[i], bidders[i] = a.ID, int64(39000+i), int64(i+1)
		requests[i], amounts[i], kinds[i] = uuid.NewString(), "100.00", "straight"
	}
	plan := strings.Join(explain(t, db, pgstore.CompareBidsSQL, auctions, seqs, requests, bidders, amounts, kinds, maxima), "\n")
	if strings.Contains(plan, "Seq Scan on bid") || strings.Contains(plan, "Hash") || !strings.Contains(plan, "idx_bid_auction_seq") {
		t.Fatalf("the comparison does not probe idx_bid_auction_seq per bid:\n%s", plan)
	}
}

func TestMyBidsStates(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	ctx := context.Background()
	const me, other = 41, 42

	leading := newLot(t, s, false)
	coldBid(t, s, leading.ID, other, 110, false)
	coldBid(t, s, leading.ID, me, 120, false)
	outbid := newLot(t, s, false)
	coldBid(t, s, outbid.ID, me, 300, true)
	coldBid(t, s, outbid.ID, other, 400, false)
	closed := newLot(t, s, false)
	coldBid(t, s, closed.ID, me, 150, false)
	if _, err := db.Exec(ctx, `UPDATE auction SET status = 'CLOSED' WHERE id = $1`, closed.ID); err != nil {
		t.Fatal(err)
	}
	newLot(t, s, false) // bid on by nobody

	tests := []struct {
		state bidgate.MyBidState
		limit int
		want  string
	}{
		{"", 10, fmt.Sprintf("%d:won:150 %d:outbid:101/300 %d:leading:120 ", closed.ID, outbid.ID, leading.ID)},
		{"", 1, fmt.Sprintf("%d:won:150 ", closed.ID)},
		{bidgate.MyBidLeading, 10, fmt.Sprintf("%d:leading:120 ", leading.ID)},
		{bidgate.MyBidOutbid, 10, fmt.Sprintf("%d:outbid:101/300 ", outbid.ID)},
		{bidgate.MyBidLost, 10, ""},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.state, tc.limit), func(t *testing.T) {
			page, err := s.MyBids(ctx, bidgate.MyBidsQuery{UserID: me, State: tc.state, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, m := range page.Items {
				got += fmt.Sprintf("%d:%s:%s", m.Auction.ID, m.State, m.Highest)
				if m.MaxAmount.Valid {
					got += "/" + m.MaxAmount.Decimal.String()
				}
				got += " "
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if more := page.Next != 0; more != (tc.limit == 1) {
				t.Fatalf("next %d with limit %d", page.Next, tc.limit)
			}
		})
	}
}
