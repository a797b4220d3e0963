package shard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	lock := lockAuction(t, db, a.ID)

	r := bid(a.ID, 1, "200")
	c, cancel := context.WithTimeout(ctx, 2*time.Second) // what a forwarding node waits
	defer cancel()
	start := time.Now()
	_, err := s.PlaceBid(c, r)
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

// Bids piling up on one cold auction whose row is locked hold one
// PostgreSQL connection between them, not the pool: a bid on another
// auction goes through while they all still wait.
func TestABusyColdAuctionLeavesTheOthersConnections(t *testing.T) {
	db, _ := testdb.New(t, 4)
	// Long enough that the first bid still waits for the lock while the
	// others are counted (each group waits up to the lock timeout).
	s := newService(t, db, Config{StoreTimeout: 10 * time.Second, ColdLockTimeout: 5 * time.Second})
	busy := newAuction(t, s, "100", "1", time.Hour, time.Minute, time.Minute)
	other := newAuction(t, s, "100", "1", time.Hour, time.Minute, time.Minute)
	lock := lockAuction(t, db, busy.ID)
	const waiting = 8
	var returned atomic.Int32
	done := make(chan error, waiting)
	place := func(i int) {
		go func() {
			_, err := s.PlaceBid(ctx, bid(busy.ID, int64(10+i), "200"))
			returned.Add(1)
			done <- err
		}()
	}
	// Every one of them gets as far as it can: the first one's statement
	// waits for the row lock, the others for the auction's turn.
	place(0)
	await.NoError(t, 10*time.Second, "the first bid waiting for the row lock", func() error {
		if locked, err := lockWaiters(db); err != nil || locked < 1 {
			return fmt.Errorf("%d statements wait for a lock (%v)", locked, err)
		}
		return nil
	})
	for i := 1; i < waiting; i++ {
		place(i)
	}
	await.NoError(t, 10*time.Second, "the others waiting for the auction's turn", func() error {
		if n := s.cold.turns.Queued(busy.ID); n != waiting-1 {
			return fmt.Errorf("%d of %d bids waiting for the auction's turn, %d returned", n, waiting-1, returned.Load())
		}
		return nil
	})
	if _, err := s.PlaceBid(ctx, bid(other.ID, 99, "150")); err != nil {
		t.Fatalf("a bid on another auction: %v", err)
	}
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d of the busy auction's bids had to give up before another auction's bid got a connection", n)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Once the lock goes, one of them leads at 200 and the others are too low.
	placed := 0
	for range waiting {
		switch err := <-done; {
		case err == nil:
			placed++
		case !errors.Is(err, bidgate.ErrBidTooLow):
			t.Errorf("a waiting bid after the lock went: %v", err)
		}
	}
	if placed != 1 {
		t.Fatalf("%d of the waiting bids at the same amount were placed, want 1", placed)
	}
}

// lockAuction holds auction id's row lock in a transaction of its own,
// until the test rolls it back or ends.
func lockAuction(t *testing.T, db *pgxpool.Pool, id int64) pgx.Tx {
	t.Helper()
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lock.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Error(err)
		}
	})
	if _, err := lock.Exec(ctx, "SELECT id FROM auction WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	return lock
}

// lockWaiters is how many statements on the test's database wait for a lock.
func lockWaiters(db *pgxpool.Pool) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	return n, err
}
