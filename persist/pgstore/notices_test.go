package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/shopspring/decimal"
	"golang.org/x/sync/errgroup"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// A cold bid that takes the lead tells the leader it replaced, in its
// transaction, through the outbox: with the new price and the replaced
// leader's own maximum. A bid the leader's proxy answers replaced nobody,
// and neither does a leader raising their own maximum.
func TestColdBidTellsTheLeaderItReplaced(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	a := newLot(t, s, false) // starts at 100, increment 1
	const alice, bob = 7_000_001, 7_000_002
	for _, step := range []struct {
		bidder int64
		amount int64
		proxy  bool
		want   []string // the notices so far: "id user price max"
	}{
		{alice, 110, false, nil},
		{bob, 120, false, []string{fmt.Sprintf("outbid-%d-2 %d 120.00 110.00", a.ID, alice)}},
		{alice, 200, true, []string{fmt.Sprintf("outbid-%d-3 %d 121.00 120.00", a.ID, bob)}},
		{bob, 150, false, nil}, // answered by alice's proxy: bob never led
		{bob, 300, true, []string{fmt.Sprintf("outbid-%d-6 %d 201.00 200.00", a.ID, alice)}},
		{bob, 400, true, nil}, // bob raises his own maximum
	} {
		before := outbidNotices(t, db, a.ID)
		coldBid(t, s, a.ID, step.bidder, step.amount, step.proxy)
		got := outbidNotices(t, db, a.ID)[len(before):]
		if !slices.Equal(got, step.want) {
			t.Fatalf("after %d's bid of %d (proxy %v): notices %v, want %v", step.bidder, step.amount, step.proxy, got, step.want)
		}
	}
}

// outbidNotices lists the outbid notices of auction id in the outbox, in
// order, as "id user price max"; each must be a valid notice keyed by its
// user.
func outbidNotices(t *testing.T, db *pgxpool.Pool, id int64) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT aggregate_id, payload FROM outbox
WHERE topic = $1 AND payload->>'type' = 'outbid' AND (payload->>'auctionId')::bigint = $2 ORDER BY id`, bidgate.TopicBidNotifications, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			key     int64
			payload []byte
			n       bidgate.Notice
		)
		if err := rows.Scan(&key, &payload); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(payload, &n); err != nil {
			t.Fatalf("notice %s: %v", payload, err)
		}
		if err := n.Validate(); err != nil || n.UserID != key || n.Title != "lot" || n.At.IsZero() {
			t.Fatalf("notice %s (key %d): %v", payload, key, err)
		}
		out = append(out, fmt.Sprintf("%s %d %s %s", n.ID, n.UserID, n.Price, n.MaxAmount))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// StoredNotices answers exactly the stored ones among the ids asked, and
// asks the index once per id: a batch of a thousand ids against a table
// the planner has no statistics of (a young one, or autovacuum off) must
// not become a sequential scan, which took seconds per batch under load.
func TestStoredNoticesProbesTheIndex(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	const stored = 20_000
	if _, err := db.Exec(ctx, `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
SELECT 'outbid-probe-' || i, i, 'outbid', 1, 'lot', 1.00, clock_timestamp() FROM generate_series(1, $1) i`, stored); err != nil {
		t.Fatal(err)
	}
	idsOf := func(from, to int) []string {
		var ids []string
		for i := from; i <= to; i++ {
			ids = append(ids, fmt.Sprintf("outbid-probe-%d", i))
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		ids  []string
		want int
	}{
		{"none asked", nil, 0},
		{"none stored", idsOf(stored+1, stored+50), 0},
		{"all stored", idsOf(1, 1000), 1000},
		{"some stored", idsOf(stored-499, stored+500), 500},
		{"asked twice", append(idsOf(1, 3), idsOf(1, 3)...), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known, err := s.StoredNotices(ctx, tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(known) != tc.want {
				t.Fatalf("%d known, want %d", len(known), tc.want)
			}
			for id := range known {
				if !slices.Contains(tc.ids, id) {
					t.Fatalf("%s known but not asked", id)
				}
			}
		})
	}
	requireNoticeProbes(t, "the look-up", explain(t, db, pgstore.StoredNoticesSQL, idsOf(1, 1000)))
}

// explain is the plan of sql with args, line by line.
func explain(t *testing.T, db *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// requireNoticeProbes fails t unless the plan looks notices up in
// notification's id index, never reading the whole table.
func requireNoticeProbes(t *testing.T, what string, plan []string) {
	t.Helper()
	if joined := strings.Join(plan, "\n"); strings.Contains(joined, "Seq Scan on notification") || !strings.Contains(joined, "notification_id_key") {
		for i, l := range plan {
			plan[i] = l[:min(len(l), 120)] // not a thousand ids
		}
		t.Fatalf("%s does not probe notification's id index:\n%s", what, strings.Join(plan, "\n"))
	}
}

// A hot row that replaced a leader writes its outbid notice to the outbox
// only when the notice is not stored yet: the relay's own copy mostly
// reaches the notifier first, and a second would be dropped there. The
// look-up probes notification's id index whatever the statistics.
func TestHotBidsSkipStoredNotices(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	a := newLot(t, s, true)
	if _, err := db.Exec(ctx, `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
SELECT 'outbid-probe-' || i, i, 'outbid', 1, 'lot', 1.00, clock_timestamp() FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	stored := bidgate.Notice{ID: bidgate.NoticeID(bidgate.NoticeOutbid, a.ID, 11, 2), Type: bidgate.NoticeOutbid, UserID: 11,
		AuctionID: a.ID, Title: "lot", Price: "202.00", At: time.Now()}
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := pgstore.StoreNotices(ctx, tx, []bidgate.Notice{stored})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	bid := func(seq, bidder, outbid int64) bidgate.BidAccepted {
		b := bidgate.BidAccepted{AuctionID: a.ID, BidderID: bidder, Amount: bidgate.FormatMoney(decimal.NewFromInt(200 + seq)),
			RequestID: uuid.NewString(), Seq: seq, AcceptedAt: at, EndTime: at.Add(time.Hour), Outbid: outbid}
		if outbid != 0 {
			b.OutbidMax = bidgate.FormatMoney(decimal.NewFromInt(200 + seq - 1))
		}
		return b
	}
	bids := []bidgate.BidAccepted{bid(1, 11, 0), bid(2, 12, 11), bid(3, 13, 12)} // 2 outbids 11 (stored), 3 outbids 12
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := pgstore.WriteHotBids(ctx, tx, bids, pgstore.QueueOutbidNotices)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `SELECT payload->>'id' FROM outbox WHERE topic = 'bid-notifications' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{bidgate.NoticeID(bidgate.NoticeOutbid, a.ID, 12, 3)}; !slices.Equal(ids, want) {
		t.Fatalf("outbox notices %v, want %v (the stored %s left out)", ids, want, stored.ID)
	}
	lines, err := pgstore.ExplainOutbidNotices(ctx, db, bids)
	if err != nil {
		t.Fatal(err)
	}
	requireNoticeProbes(t, "the stored-notice look-up", lines)
}

// Notices are numbered in the order they commit, whoever stores them: a
// reader that saw notice n never later finds a new notice below n (GET
// /me/notifications?after= and the read marks depend on it). Hot rows'
// writers storing their outbid notices race notifiers storing theirs while
// a reader checks, after every read, that nothing new appeared below the
// highest n it had seen.
func TestNoticesNumberedInCommitOrder(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 6)
	s := &pgstore.Store{DB: db}
	const writers, rounds = 4, 60
	var g errgroup.Group
	for w := range writers {
		a := newLot(t, s, true)
		g.Go(func() error {
			for r := range int64(rounds) {
				err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
					if w%2 == 0 { // a persister: two rows, each outbidding the one before
						at := time.Now()
						bids := make([]bidgate.BidAccepted, 2)
						for i := range bids {
							seq := 2*r + int64(i) + 1
							bids[i] = bidgate.BidAccepted{AuctionID: a.ID, BidderID: 100 + seq, Amount: bidgate.FormatMoney(decimal.NewFromInt(200 + seq)),
								RequestID: uuid.NewString(), Seq: seq, AcceptedAt: at, EndTime: at.Add(time.Hour)}
							if seq > 1 {
								bids[i].Outbid, bids[i].OutbidMax = 99+seq, bidgate.FormatMoney(decimal.NewFromInt(199+seq))
							}
						}
						written, err := pgstore.WriteHotBids(ctx, tx, bids, pgstore.StoreOutbidNotices)
						if err == nil && len(written.Notices) != len(bids)-int(max(0, 1-2*r)) {
							err = fmt.Errorf("round %d stored notices %v", r, written.Notices)
						}
						return err
					}
					n := bidgate.Notice{ID: bidgate.NoticeID(bidgate.NoticeLost, a.ID, r+1, 0), Type: bidgate.NoticeLost,
						UserID: r + 1, AuctionID: a.ID, Title: "lot", Price: "300.00", At: time.Now()} // a notifier's
					_, err := pgstore.StoreNotices(ctx, tx, []bidgate.Notice{n})
					return err
				})
				if err != nil {
					return fmt.Errorf("writer %d: %w", w, err)
				}
			}
			return nil
		})
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	var seenMax, seenBelow int64 // the highest n seen, and how many notices were at or below it
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			if err := db.QueryRow(ctx, `SELECT count(*) FROM notification`).Scan(&total); err != nil {
				t.Fatal(err)
			}
			if want := int64(writers/2*(2*rounds-1) + writers/2*rounds); total != want {
				t.Fatalf("%d notices stored, want %d", total, want)
			}
			t.Logf("%d reads", reads)
			return
		default:
		}
		var below, top, all int64
		if err := db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE n <= $1), coalesce(max(n), 0), count(*) FROM notification`, seenMax).Scan(&below, &top, &all); err != nil {
			t.Fatal(err)
		}
		if below != seenBelow {
			t.Fatalf("%d notices at or below n %d, %d when it was the highest seen: one committed after a higher one", below, seenMax, seenBelow)
		}
		seenMax, seenBelow = top, all
	}
}
