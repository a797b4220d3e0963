package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// The close pass's look for due work, which every node runs every 250 ms,
// reads the first entries of the open auctions' indexes, never the table:
// written as EXISTS (... end_time <= now) it scanned all 20,000 open
// auctions (the planner cannot see the clock's value).
func TestDueWorkReadsTheIndexes(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 2)
	if _, err := db.Exec(ctx, `
INSERT INTO auction (seller_id, title, start_price, current_price, min_increment, bid_count, end_time, extend_window, extend_by, mode)
SELECT 7, 'lot ' || g, 10, 10, 1, 0, clock_timestamp() + INTERVAL '1 hour' + g * INTERVAL '1 millisecond',
       INTERVAL '0', INTERVAL '1 second', CASE WHEN g % 5000 = 0 THEN 'HOT' ELSE 'COLD' END
  FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE auction`); err != nil {
		t.Fatal(err)
	}
	due, err := (&pgstore.Store{DB: db}).Due(ctx, time.Second)
	if err != nil || due != (pgstore.DueWork{}) {
		t.Fatalf("due %+v, %v; want nothing", due, err)
	}
	plan := strings.Join(explain(t, db, pgstore.DueWorkSQL, 1.0), "\n")
	if strings.Contains(plan, "Seq Scan on auction") {
		t.Fatalf("the look for due work scans the auctions:\n%s", plan)
	}
}
