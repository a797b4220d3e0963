package persist_test

import (
	"context"
	"sync"
	"testing"

	"bidgate/persist"
	"bidgate/persist/pgtest"
)

// Nodes starting together all migrate; the schema must come out once.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	db, _ := pgtest.New(t, 8)
	if _, err := db.Exec(context.Background(), `DROP TABLE outbox, bid, auction, schema_migrations`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([][]int, 4)
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); applied[i], errs[i] = persist.Migrate(context.Background(), db) }()
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
	}
	total := 0
	for i := range 4 {
		total += len(applied[i])
	}
	if total != 1 {
		t.Fatalf("migrations applied %v: want version 1 applied exactly once in all", applied)
	}
	if again, err := persist.Migrate(context.Background(), db); err != nil || len(again) != 0 {
		t.Fatalf("a later Migrate applied %v (err %v), want nothing", again, err)
	}
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("schema_migrations has %d rows (err %v)", n, err)
	}
}
