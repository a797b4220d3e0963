package pgstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// The relays' reads cost what waits, not what was ever published: a
// published row's entry in a partial index on published_at stayed, dead,
// until a vacuum of the whole outbox, and every pass, backlog read and
// notice sweep stepped over all of them.
func TestOutboxReadsCostTheBacklogNotTheHistory(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	if _, err := db.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// A week of rows published, 20,000 here, in rounds: between them the
	// relays vacuum outbox_pending, as small as the backlog; autovacuum
	// comes rarely to the outbox, a week of rows.
	s := &pgstore.Store{DB: db}
	var last int64
	for round := range 20 {
		history := make([]pgstore.Event, 1000)
		for i := range history {
			history[i] = pgstore.Event{AggregateID: int64(i), Payload: fmt.Appendf(nil, `{"id": "n-%d-%d", "type": "outbid", "title": "%s"}`, round, i, strings.Repeat("lot ", 30))}
		}
		if err := s.AddEvents(ctx, bidgate.TopicBidNotifications, history); err != nil {
			t.Fatal(err)
		}
		for n := -1; n != 0; {
			err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				store := &pgstore.Store{DB: tx}
				events, err := store.PendingEvents(ctx, bidgate.TopicBidNotifications, 500)
				if n = len(events); err != nil || n == 0 {
					return err
				}
				ids := make([]int64, n)
				for i, e := range events {
					ids[i] = e.ID
				}
				last = ids[n-1]
				return store.MarkPublished(ctx, bidgate.TopicBidNotifications, ids)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := s.VacuumPending(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waiting := []pgstore.Event{{AggregateID: 1, Payload: []byte(`{"id": "n-new"}`)}}
	for _, topic := range []string{bidgate.TopicBidNotifications, bidgate.TopicAuctionClosed} {
		if err := s.AddEvents(ctx, topic, waiting); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, "ANALYZE outbox, outbox_pending"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		read string
		sql  string
		args []any
	}{
		{"a relay's pass", pgstore.PendingOutboxSQL, []any{bidgate.TopicBidNotifications, 500}},
		{"the backlog", pgstore.OutboxBacklogSQL, []any{bidgate.TopicBidNotifications}},
		{"another topic's backlog", pgstore.OutboxBacklogSQL, []any{bidgate.TopicAuctionClosed}},
		{"the notice sweep", pgstore.PublishedNoticesSQL, []any{bidgate.TopicBidNotifications, last, 10.0, 1000}},
	} {
		t.Run(tc.read, func(t *testing.T) {
			plan, pages := pagesRead(t, db, tc.sql, tc.args...)
			if pages > 40 {
				t.Fatalf("%s read %d pages with one row waiting and 20,000 published:\n%s", tc.read, pages, plan)
			}
			t.Logf("%d pages", pages)
		})
	}
}

// An entry whose row has nothing left to send is handed out as delivered,
// and marking it removes the entry and keeps the row as it is: a row a
// previous version's relay published (it knows only published_at), and a
// row deleted by hand.
func TestPendingEventsWithNothingLeftToSend(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	s := &pgstore.Store{DB: db}
	topic := bidgate.TopicAuctionClosed
	events := []pgstore.Event{{AggregateID: 1, Payload: []byte(`{}`)}, {AggregateID: 2, Payload: []byte(`{}`)}, {AggregateID: 3, Payload: []byte(`{}`)}}
	if err := s.AddEvents(ctx, topic, events); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	rows, err := db.Query(ctx, `SELECT id FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(ids) != 3 {
		t.Fatalf("outbox ids %v, %v", ids, err)
	}
	const before = "2026-01-02 03:04:05+00"
	if _, err := db.Exec(ctx, `UPDATE outbox SET published_at = $2 WHERE id = $1`, ids[0], before); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `DELETE FROM outbox WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		store := &pgstore.Store{DB: tx}
		got, err := store.PendingEvents(ctx, topic, 10)
		if err != nil {
			return err
		}
		if len(got) != 3 {
			return fmt.Errorf("%d pending, want 3", len(got))
		}
		for i, want := range []bool{true, true, false} {
			if got[i].ID != ids[i] || got[i].Delivered != want {
				return fmt.Errorf("entry %d: id %d delivered %v, want id %d delivered %v", i, got[i].ID, got[i].Delivered, ids[i], want)
			}
		}
		return store.MarkPublished(ctx, topic, ids)
	})
	if err != nil {
		t.Fatal(err)
	}
	var pending int
	var kept bool
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox_pending), (SELECT published_at = $2 FROM outbox WHERE id = $1)`, ids[0], before).Scan(&pending, &kept); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || !kept {
		t.Fatalf("after marking: %d entries left, the earlier publication's time kept %v; want 0, true", pending, kept)
	}
}

// The migration makes every row the previous version left unpublished
// pending, and rows that version's statements add afterwards (during a
// rolling upgrade) are pending too.
func TestOutboxPendingMigration(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	dropSchema(t, db)
	if err := pgstore.MigrateTo(ctx, db, 15); err != nil {
		t.Fatal(err)
	}
	// The previous version's writes: rows published and not.
	const previousInsert = `INSERT INTO outbox (topic, aggregate_id, payload, published_at) VALUES ($1, $2, '{}', $3)`
	add := func(topic string, aggregate int64, published bool) {
		t.Helper()
		var at *time.Time
		if published {
			now := time.Now()
			at = &now
		}
		if _, err := db.Exec(ctx, previousInsert, topic, aggregate, at); err != nil {
			t.Fatal(err)
		}
	}
	add(bidgate.TopicAuctionClosed, 1, true)
	add(bidgate.TopicAuctionClosed, 2, false)
	add(bidgate.TopicBidNotifications, 3, false)
	if _, err := pgstore.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	add(bidgate.TopicAuctionCancelled, 4, false)
	add(bidgate.TopicAuctionCancelled, 5, true)
	rows, err := db.Query(ctx, `SELECT p.topic, o.aggregate_id FROM outbox_pending p JOIN outbox o USING (id) ORDER BY o.aggregate_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var topic string
		var aggregate int64
		err := r.Scan(&topic, &aggregate)
		return fmt.Sprint(topic, " ", aggregate), err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{bidgate.TopicAuctionClosed + " 2", bidgate.TopicBidNotifications + " 3", bidgate.TopicAuctionCancelled + " 4"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
}

var pagesOf = regexp.MustCompile(`Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?`)

// pagesRead runs sql with args under EXPLAIN (ANALYZE, BUFFERS) and returns
// the plan and the pages its top node touched, in the cache or not.
func pagesRead(t *testing.T, db *pgxpool.Pool, sql string, args ...any) (string, int) {
	t.Helper()
	lines := explain(t, db, "(ANALYZE, BUFFERS) "+sql, args...)
	for _, l := range lines {
		if m := pagesOf.FindStringSubmatch(l); m != nil {
			pages := 0
			for _, n := range m[1:] {
				if n == "" {
					continue
				}
				v, err := strconv.Atoi(n)
				if err != nil {
					t.Fatal(err)
				}
				pages += v
			}
			return strings.Join(lines, "\n"), pages
		}
	}
	t.Fatalf("no buffer counts in the plan:\n%s", strings.Join(lines, "\n"))
	return "", 0
}
