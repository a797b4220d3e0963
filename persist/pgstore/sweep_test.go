package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// The sweep reads the published bid-notifications rows after its cursor up
// to the first one not settled (unpublished, or published within the
// grace), never past it, and tells which of them have no stored notice.
func TestUnstoredNoticesStopAtTheFirstUnsettledRow(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	const grace = time.Hour
	// A row's age since it was published: -1 is unpublished.
	const old, fresh, unpublished = 2 * time.Hour, time.Minute, time.Duration(-1)
	cases := []struct {
		name    string
		rows    []time.Duration
		stored  []int // indexes of rows whose notice is stored
		limit   int
		checked int
		lost    int
	}{
		{name: "all settled", rows: []time.Duration{old, old, old}, stored: []int{1}, limit: 10, checked: 3, lost: 2},
		{name: "stops within the grace", rows: []time.Duration{old, fresh, old}, limit: 10, checked: 1, lost: 1},
		{name: "stops at the unpublished", rows: []time.Duration{old, old, unpublished, old}, stored: []int{0}, limit: 10, checked: 2, lost: 1},
		{name: "first within the grace", rows: []time.Duration{fresh, old}, limit: 10, checked: 0, lost: 0},
		{name: "limit", rows: []time.Duration{old, old, old}, limit: 2, checked: 2, lost: 2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := db.Exec(ctx, `DELETE FROM outbox; DELETE FROM outbox_pending`); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(ctx, `UPDATE notice_sweep SET swept_upto = 0`); err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for j, age := range c.rows {
				id := fmt.Sprintf("outbid-%d-%d", i, j)
				var published *time.Time
				if age >= 0 {
					at := time.Now().Add(-age)
					published = &at
				}
				var rowID int64
				if err := db.QueryRow(ctx, `INSERT INTO outbox (topic, aggregate_id, payload, published_at)
VALUES ($1, 7, jsonb_build_object('id', $2::text), $3) RETURNING id`, bidgate.TopicBidNotifications, id, published).Scan(&rowID); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, rowID)
			}
			for _, j := range c.stored {
				if _, err := db.Exec(ctx, `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
VALUES ($1, 7, 'outbid', 1, 'lot', 1.00, clock_timestamp())`, fmt.Sprintf("outbid-%d-%d", i, j)); err != nil {
					t.Fatal(err)
				}
			}
			var (
				lost    [][]byte
				upto    int64
				checked int
			)
			if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
				lost, upto, checked, err = pgstore.UnstoredNotices(ctx, tx, grace, c.limit)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if checked != c.checked || len(lost) != c.lost {
				t.Fatalf("checked %d rows, %d lost; want %d and %d", checked, len(lost), c.checked, c.lost)
			}
			if c.checked > 0 && upto != ids[c.checked-1] {
				t.Fatalf("cursor may move to %d, want %d", upto, ids[c.checked-1])
			}
		})
	}
}

// While one notifier holds the sweep's cursor, another's pass checks
// nothing and says so at once, instead of waiting for the first to end.
func TestUnstoredNoticesSkipABusySweep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, _ := testdb.New(t, 4)
	holder, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := holder.Rollback(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if _, _, _, err := pgstore.UnstoredNotices(ctx, holder, time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	// Held until holder ends: without SKIP LOCKED this waits for it (and
	// fails at ctx's deadline, since holder ends only after).
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, _, _, err := pgstore.UnstoredNotices(ctx, tx, time.Hour, 10)
		return err
	})
	if !errors.Is(err, pgstore.ErrSweepBusy) {
		t.Fatalf("second sweep: %v, want %v", err, pgstore.ErrSweepBusy)
	}
}
