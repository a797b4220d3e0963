package pgstore_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// The close pass's look for due work, which every node runs every 250 ms,
// reads a few index entries, never every open auction: whether the
// statistics know the open auctions (analyzed) or predate a bulk insert of
// them (stale, as right after a sale's auctions are created). Written as
// EXISTS (... end_time <= now) it scanned the table; as min(end_time)
// without the bound, with stale statistics, it read every open cold
// auction before the first hot one.
func TestDueWorkReadsFewRows(t *testing.T) {
	for _, analyzed := range []bool{true, false} {
		t.Run(map[bool]string{true: "analyzed", false: "stale statistics"}[analyzed], func(t *testing.T) {
			ctx := context.Background()
			db, _ := testdb.New(t, 2)
			insert := func(n int, mode string, in time.Duration) {
				t.Helper()
				if _, err := db.Exec(ctx, `
INSERT INTO auction (seller_id, title, start_price, current_price, min_increment, bid_count, end_time, extend_window, extend_by, mode)
SELECT 7, 'lot ' || g, 10, 10, 1, 0, clock_timestamp() + $3 * INTERVAL '1 millisecond' + g * INTERVAL '1 millisecond',
       INTERVAL '0', INTERVAL '1 second', $2
  FROM generate_series(1, $1) g`, n, mode, in.Milliseconds()); err != nil {
					t.Fatal(err)
				}
			}
			insert(4, "HOT", 2*time.Hour)
			if _, err := db.Exec(ctx, `ANALYZE auction`); err != nil {
				t.Fatal(err)
			}
			insert(20000, "COLD", time.Hour)
			if analyzed {
				if _, err := db.Exec(ctx, `ANALYZE auction`); err != nil {
					t.Fatal(err)
				}
			}
			due, err := (&pgstore.Store{DB: db}).Due(ctx, time.Second)
			if err != nil || due != (pgstore.DueWork{}) {
				t.Fatalf("due %+v, %v; want nothing", due, err)
			}
			if plan, rows := rowsRead(t, db, pgstore.DueWorkSQL, 1.0); rows > 100 {
				t.Fatalf("the look for due work read %d rows:\n%s", rows, plan)
			}
		})
	}
}

var rowsOf = regexp.MustCompile(`actual time=[\d.]+\.\.[\d.]+ rows=(\d+)|Rows Removed by Filter: (\d+)`)

// rowsRead runs sql with args under EXPLAIN ANALYZE and returns the plan
// and the rows its scans read: returned plus removed by their filters.
func rowsRead(t *testing.T, db *pgxpool.Pool, sql string, args ...any) (string, int) {
	t.Helper()
	lines := explain(t, db, "ANALYZE "+sql, args...)
	read := 0
	for _, l := range lines {
		if !strings.Contains(l, "Scan") && !strings.Contains(l, "Rows Removed") {
			continue
		}
		for _, m := range rowsOf.FindAllStringSubmatch(l, -1) {
			n, err := strconv.Atoi(m[1] + m[2])
			if err != nil {
				t.Fatal(err)
			}
			read += n
		}
	}
	return strings.Join(lines, "\n"), read
}
