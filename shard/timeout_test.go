package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
)

// A cold bid that finds its auction's row locked (an operator's
// transaction, a stuck closer) gives up inside PostgreSQL before the bid's
// budget ends, and so before a forwarding node's 2 s: it is answered 503
// store_timeout, it is not placed when the lock goes, and the same key then
// decides afresh.
func TestColdBidGivesUpOnALockedRow(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{StoreTimeout: DefaultConfig().StoreTimeout})
	a := newAuction(t, s, "100", "1", time.Hour, time.Minute, time.Minute)
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, "SELECT id FROM auction WHERE id = $1 FOR UPDATE", a.ID); err != nil {
		t.Fatal(err)
	}

	r := bid(a.ID, 1, "200")
	c, cancel := context.WithTimeout(ctx, 2*time.Second) // what a forwarding node waits
	defer cancel()
	start := time.Now()
	_, err = s.PlaceBid(c, r)
	took := time.Since(start)
	var timeout *bidgate.TimeoutError
	if !errors.As(err, &timeout) || !timeout.Undecided || !errors.Is(err, bidgate.ErrUnavailable) {
		t.Errorf("a bid on a locked row: %v; want an undecided *bidgate.TimeoutError", err)
	}
	if limit := DefaultConfig().StoreTimeout; took >= limit {
		t.Errorf("answered after %v; want within the store budget, %v", took, limit)
	}

	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Once no other session runs a statement, one its client abandoned has
	// committed, if it was going to.
	await.NoError(t, 10*time.Second, "no statement running", func() error {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND state NOT IN ('idle', 'idle in transaction')`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d statements running", n)
		}
		return nil
	})
	var rows int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM bid WHERE request_id = $1", r.RequestID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatalf("the bid answered 503 was placed once the lock went (%d rows)", rows)
	}
	res, err := s.PlaceBid(ctx, r)
	if err != nil || res.Replayed || res.Bid.Seq != 1 {
		t.Fatalf("the same key after the lock: %+v, %v; want the bid placed afresh", res, err)
	}
}
