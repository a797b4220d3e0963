package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// PendingEvents hands each topic's unpublished rows out oldest first and
// marks delivered exactly the notices stored already (never another
// topic's row), probing notification's id index per row: hashing the
// whole table for every pass was its cost under load.
func TestPendingEventsProbeStoredNotices(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	if _, err := db.Exec(ctx, `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
SELECT 'n-' || i, i, 'outbid', 1, 'lot', 1.00, clock_timestamp() FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	// 300 notices, the first 100 stored; 5 closes whose payload ids
	// happen to match stored notices.
	s := &pgstore.Store{DB: db}
	var notices, closes []pgstore.Event
	for i := 19_901; i <= 20_200; i++ {
		notices = append(notices, pgstore.Event{AggregateID: 1, Payload: fmt.Appendf(nil, `{"id": "n-%d"}`, i)})
	}
	for i := 1; i <= 5; i++ {
		closes = append(closes, pgstore.Event{AggregateID: int64(i), Payload: fmt.Appendf(nil, `{"id": "n-%d"}`, i)})
	}
	if err := s.AddEvents(ctx, bidgate.TopicBidNotifications, notices); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvents(ctx, bidgate.TopicAuctionClosed, closes); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "ANALYZE notification, outbox"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic          string
		limit          int
		want, stored   int
		firstDelivered bool
	}{
		{bidgate.TopicBidNotifications, 500, 300, 100, true},
		{bidgate.TopicBidNotifications, 50, 50, 50, true},
		{bidgate.TopicAuctionClosed, 500, 5, 0, false},
	} {
		t.Run(fmt.Sprintf("%s, up to %d", tc.topic, tc.limit), func(t *testing.T) {
			var events []pgstore.Event
			err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
				events, err = (&pgstore.Store{DB: tx}).PendingEvents(ctx, tc.topic, tc.limit)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != tc.want {
				t.Fatalf("%d rows, want %d", len(events), tc.want)
			}
			stored := 0
			for i, e := range events {
				if i > 0 && e.ID <= events[i-1].ID {
					t.Fatalf("row %d (id %d) after id %d: not oldest first", i, e.ID, events[i-1].ID)
				}
				if e.Delivered {
					stored++
				}
			}
			if stored != tc.stored || events[0].Delivered != tc.firstDelivered {
				t.Errorf("%d delivered, the first %v; want %d, %v", stored, events[0].Delivered, tc.stored, tc.firstDelivered)
			}
		})
	}
	requireNoticeProbes(t, "the stored-notice look-up", explain(t, db, pgstore.PendingOutboxSQL, bidgate.TopicBidNotifications, 500))
}

// PruneEvents deletes the published rows past the retention from the head
// of the outbox, skipping (not stopping at) the rows still needed: the
// unpublished, the young, and the notices the sweep has not passed.
func TestPruneEventsKeepsWhatIsStillNeeded(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	const keep = time.Hour
	// A row's age since it was published: -1 is unpublished.
	const old, young, unpublished = 2 * time.Hour, time.Minute, time.Duration(-1)
	type row struct {
		topic  string
		age    time.Duration
		swept  bool // a notice the sweep's cursor has passed
		pruned bool
	}
	rows := []row{
		{bidgate.TopicAuctionClosed, old, false, true},
		{bidgate.TopicAuctionClosed, young, false, false},
		{bidgate.TopicAuctionCancelled, unpublished, false, false},
		{bidgate.TopicBidNotifications, old, true, true},
		{bidgate.TopicBidNotifications, unpublished, false, false}, // the sweep stops here
		{bidgate.TopicBidNotifications, old, false, false},
		{bidgate.TopicAuctionCancelled, old, false, true},
	}
	ids := make([]int64, len(rows))
	swept := int64(0)
	for i, r := range rows {
		var published *time.Time
		if r.age >= 0 {
			at := time.Now().Add(-r.age)
			published = &at
		}
		if err := db.QueryRow(ctx, `INSERT INTO outbox (topic, aggregate_id, payload, created_at, published_at)
VALUES ($1, 7, jsonb_build_object('id', $2::text), now() - interval '3 hours', $3) RETURNING id`, r.topic, fmt.Sprint("row-", i), published).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
		if r.swept {
			swept = ids[i]
		}
	}
	if _, err := db.Exec(ctx, `UPDATE notice_sweep SET swept_upto = $1`, swept); err != nil {
		t.Fatal(err)
	}
	left := func() map[int64]bool {
		t.Helper()
		got, err := db.Query(ctx, `SELECT id FROM outbox`)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := pgx.CollectRows(got, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]bool{}
		for _, id := range kept {
			m[id] = true
		}
		return m
	}

	// A pass reads only the head: the first two rows.
	if n, err := s.PruneEvents(ctx, keep, 2); err != nil || n != 1 {
		t.Fatalf("the first pass of 2 rows deleted %d (%v), want 1", n, err)
	}
	if kept := left(); kept[ids[0]] || !kept[ids[3]] || len(kept) != len(rows)-1 {
		t.Fatalf("after the first pass, rows %v are left; want all but %d", kept, ids[0])
	}
	if n, err := s.PruneEvents(ctx, keep, 100); err != nil || n != 2 {
		t.Fatalf("the second pass deleted %d (%v), want 2", n, err)
	}
	kept := left()
	for i, r := range rows {
		if kept[ids[i]] == r.pruned {
			t.Errorf("row %d (%s, published %v ago, swept %v): kept %v, want pruned %v", i, r.topic, r.age, r.swept, kept[ids[i]], r.pruned)
		}
	}
	if n, err := s.PruneEvents(ctx, keep, 100); err != nil || n != 0 {
		t.Fatalf("a pass with nothing to prune deleted %d (%v)", n, err)
	}

	// However big the outbox, a pass walks its head by the primary key.
	if _, err := db.Exec(ctx, `INSERT INTO outbox (topic, aggregate_id, payload, published_at)
SELECT 'auction-closed', i, '{}', clock_timestamp() FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "ANALYZE outbox"); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(explain(t, db, pgstore.PruneOutboxSQL, keep.Seconds(), 5000), "\n")
	if strings.Contains(plan, "Seq Scan on outbox") || !strings.Contains(plan, "outbox_pkey") {
		t.Fatalf("pruning does not walk the outbox's primary key:\n%s", plan)
	}
}
