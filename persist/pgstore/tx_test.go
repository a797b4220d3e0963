package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// TestInTxFinishesItsCommit: a context that ends while the commit is under
// way (a deferred trigger makes it slow) does not abandon it: InTx returns
// the commit's own outcome. One that ends before the commit still rolls the
// transaction back.
func TestInTxFinishesItsCommit(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	if _, err := db.Exec(ctx, `
CREATE TABLE slow (x int);
CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.2); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON slow
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`); err != nil {
		t.Fatal(err)
	}
	committing := func() (int, error) {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND state = 'active' AND query ILIKE 'commit%'`).Scan(&n)
		return n, err
	}
	tests := []struct {
		name     string
		duringFn bool // the context ends inside fn, before the commit
		wantErr  bool
		wantRows int
	}{
		{"ends during the commit", false, false, 1},
		{"ends before the commit", true, true, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- pgstore.InTx(runCtx, db, func(tx pgx.Tx) error {
					if tc.duringFn {
						cancel()
					}
					_, err := tx.Exec(runCtx, `INSERT INTO slow VALUES ($1)`, i)
					return err
				})
			}()
			if !tc.duringFn {
				await.Until(t, 30*time.Second, "the commit under way", nil, func() (any, bool) {
					n, err := committing()
					return []any{n, err}, err == nil && n == 1
				})
				cancel()
			}
			err := <-done
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("InTx: %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, context.Canceled) {
				t.Fatalf("InTx: %v, want context.Canceled", err)
			}
			var rows int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM slow WHERE x = $1`, i).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != tc.wantRows {
				t.Fatalf("%d rows committed, want %d", rows, tc.wantRows)
			}
		})
	}
}
