package pgstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// Nodes starting together all migrate; the schema must come out once.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	db, _ := testdb.New(t, 8)
	dropSchema(t, db)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([][]int, 4)
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); applied[i], errs[i] = pgstore.Migrate(context.Background(), db) }()
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
	}
	times := map[int]int{}
	for i := range 4 {
		for _, v := range applied[i] {
			times[v]++
		}
	}
	var rows int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if len(times) != rows || times[1] != 1 {
		t.Fatalf("migrations applied %v, %d recorded: want each version applied exactly once in all", applied, rows)
	}
	for v, n := range times {
		if n != 1 {
			t.Fatalf("version %d applied %d times", v, n)
		}
	}
	if again, err := pgstore.Migrate(context.Background(), db); err != nil || len(again) != 0 {
		t.Fatalf("a later Migrate applied %v (err %v), want nothing", again, err)
	}
}

// dropSchema leaves db as a database no migration has touched.
func dropSchema(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `DROP TABLE outbox, outbox_pending, bid, auction, bidder_alias, notification, notification_read, notice_sweep, close_notice, schema_migrations`); err != nil {
		t.Fatal(err)
	}
}
