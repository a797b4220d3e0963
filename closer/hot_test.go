package closer

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/persist/redisstore"
)

// TestHotClose: the closer asks Redis, whose clock decided the bids, and
// settles PostgreSQL with Redis's final state, or moves the row's end when
// Redis extended the auction.
func TestHotClose(t *testing.T) {
	e := newEnv(t, 8, Config{})
	tests := []struct {
		name      string
		bids      []string // by bidders 1, 2, ...
		redisEnd  time.Duration
		dropState bool // Redis has no state: the row, as the persister left it, is the truth
		wantOpen  bool
		winner    *int64
		price     string
		bidCount  int64
	}{
		{name: "ended in Redis", bids: []string{"101", "105.50", "230"}, redisEnd: -time.Second,
			winner: ptr(3), price: "230.00", bidCount: 3},
		{name: "no bid", redisEnd: -time.Second, price: "100.00"},
		{name: "extended in Redis", bids: []string{"101"}, redisEnd: time.Minute, wantOpen: true},
		{name: "no state in Redis", dropState: true, winner: ptr(42), price: "150.25", bidCount: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := e.newAuction(t, true, "100", 0)
			for i, amount := range tc.bids {
				e.bid(t, a.ID, int64(i+1), amount)
			}
			var redisEnd int64
			if tc.dropState {
				if err := e.rdb.Del(ctx, redisstore.KeysOf(a.ID).State).Err(); err != nil {
					t.Fatal(err)
				}
				if _, err := e.db.Exec(ctx, `UPDATE auction SET current_price = 150.25, leader_id = 42, bid_count = 2 WHERE id = $1`, a.ID); err != nil {
					t.Fatal(err)
				}
			} else {
				redisEnd = e.setRedisEnd(t, a.ID, tc.redisEnd)
			}
			e.endInPostgres(t, a.ID)
			extensions := testutil.ToFloat64(e.closer.metrics.extensions)

			n, err := e.closer.CloseDue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantOpen {
				r := readRow(t, e.db, a.ID)
				if n != 0 || r.status != bidgate.StatusOpen || r.endTime.UnixMicro() != redisEnd {
					t.Fatalf("closed %d; row %s ending %v, want OPEN ending at Redis's %v", n, r.status, r.endTime, time.UnixMicro(redisEnd))
				}
				if got := testutil.ToFloat64(e.closer.metrics.extensions) - extensions; got != 1 {
					t.Fatalf("%v extensions counted, want 1", got)
				}
				if c := count(t, e.db, `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND topic = 'auction-closed'`, a.ID); c != 0 {
					t.Fatalf("%d outbox rows for an open auction", c)
				}
				// No longer due: the next pass leaves it alone.
				if n, err := e.closer.CloseDue(ctx); err != nil || n != 0 {
					t.Fatalf("second pass closed %d: %v", n, err)
				}
				e.bid(t, a.ID, 9, "500") // still open in Redis too
				return
			}
			if n != 1 {
				t.Fatalf("closed %d auctions, want 1", n)
			}
			checkClosed(t, e.db, a.ID, tc.winner, tc.price, tc.bidCount)
			if !tc.dropState {
				if status := e.rdb.HGet(ctx, redisstore.KeysOf(a.ID).State, "status").Val(); status != "CLOSED" {
					t.Fatalf("Redis status %q, want CLOSED", status)
				}
				if ttl := e.rdb.TTL(ctx, redisstore.KeysOf(a.ID).State).Val(); ttl <= 0 || ttl > 24*time.Hour {
					t.Fatalf("closed auction's state has TTL %v, want up to 24h", ttl)
				}
			}
			if _, err := e.shards.PlaceBid(ctx, bidRequest(a.ID, 9, "100000")); !errors.Is(err, bidgate.ErrAuctionClosed) {
				t.Fatalf("bid after the close: %v", err)
			}
			// Closing again changes nothing.
			if n, err := e.closer.CloseDue(ctx); err != nil || n != 0 {
				t.Fatalf("second pass closed %d: %v", n, err)
			}
			checkClosed(t, e.db, a.ID, tc.winner, tc.price, tc.bidCount)
		})
	}
}

// TestHotCrashBetweenRedisAndPostgres: Redis closed the auction but the
// PostgreSQL transaction rolled back. The row stays OPEN (and Redis refuses
// bids); the next pass, by another closer, settles it with the same winner
// and writes the one event.
func TestHotCrashBetweenRedisAndPostgres(t *testing.T) {
	e := newEnv(t, 8, Config{})
	a := e.newAuction(t, true, "100", 0)
	e.bid(t, a.ID, 1, "120")
	e.bid(t, a.ID, 2, "150")
	e.setRedisEnd(t, a.ID, -time.Second)
	e.endInPostgres(t, a.ID)

	crash := errors.New("crash")
	crashes := 0
	e.closer.afterRedisClose = func(id int64) error {
		if id == a.ID {
			crashes++
			return crash
		}
		return nil
	}
	for range 2 { // the script is idempotent: crashing twice is the same
		if _, err := e.closer.CloseDue(ctx); !errors.Is(err, crash) {
			t.Fatalf("pass with a crash: %v, want %v", err, crash)
		}
		if r := readRow(t, e.db, a.ID); r.status != bidgate.StatusOpen || r.leader != nil {
			t.Fatalf("after the crash the row is %s with leader %v, want untouched", r.status, fmtLeader(r.leader))
		}
		if c := count(t, e.db, `SELECT count(*) FROM outbox WHERE topic = 'auction-closed'`); c != 0 {
			t.Fatalf("%d outbox rows after a rolled back close", c)
		}
		if status := e.rdb.HGet(ctx, redisstore.KeysOf(a.ID).State, "status").Val(); status != "CLOSED" {
			t.Fatalf("Redis status %q, want CLOSED", status)
		}
		if _, err := e.shards.PlaceBid(ctx, bidRequest(a.ID, 3, "1000")); !errors.Is(err, bidgate.ErrAuctionClosed) {
			t.Fatalf("bid after Redis closed: %v", err)
		}
	}
	if crashes != 2 {
		t.Fatalf("hook ran %d times, want 2", crashes)
	}

	restarted := New(e.db, e.rdb, Config{}, nil)
	if n, err := restarted.CloseDue(ctx); err != nil || n != 1 {
		t.Fatalf("pass after the crash closed %d: %v", n, err)
	}
	checkClosed(t, e.db, a.ID, ptr(2), "150.00", 2)
	if n, err := restarted.CloseDue(ctx); err != nil || n != 0 {
		t.Fatalf("third pass closed %d: %v", n, err)
	}
	if c := count(t, e.db, `SELECT count(*) FROM outbox WHERE topic = 'auction-closed'`); c != 1 {
		t.Fatalf("%d outbox rows, want 1", c)
	}
}

// TestHotConcurrentClosers: two closers on the same ended hot auctions,
// small batches, at once: each auction is settled once, with Redis's winner.
func TestHotConcurrentClosers(t *testing.T) {
	const auctions = 30
	e := newEnv(t, 16, Config{})
	type want struct {
		leader *int64
		price  string
		bids   int64
	}
	wants := map[int64]want{}
	for i := range auctions {
		a := e.newAuction(t, true, "100", 0)
		w := want{price: "100.00"}
		for b := range i % 4 {
			amount := strconv.Itoa(101 + 10*b + i)
			e.bid(t, a.ID, int64(b+1), amount)
			w = want{leader: ptr(int64(b + 1)), price: amount + ".00", bids: int64(b + 1)}
		}
		e.setRedisEnd(t, a.ID, -time.Second)
		e.endInPostgres(t, a.ID)
		wants[a.ID] = w
	}

	closers := []*Closer{New(e.db, e.rdb, Config{BatchSize: 4}, nil), New(e.db, e.rdb, Config{BatchSize: 4}, nil)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	closedBy := make([]int, len(closers))
	for i, c := range closers {
		wg.Go(func() {
			for {
				n, err := c.CloseDue(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				closedBy[i] += n
				mu.Unlock()
				if count(t, e.db, `SELECT count(*) FROM auction WHERE status = 'OPEN'`) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if closedBy[0]+closedBy[1] != auctions {
		t.Fatalf("closers closed %v, want %d in all", closedBy, auctions)
	}
	t.Logf("closed per closer: %v", closedBy)
	for id, w := range wants {
		checkClosed(t, e.db, id, w.leader, w.price, w.bids)
	}
}

// TestHotClosePersistsBidsFirst: a hot auction is settled only once
// PostgreSQL holds every bid Redis accepted. Bids that Kafka never
// delivered are written from the Redis log in the closing transaction; a
// bid missing from both keeps the auction OPEN (Redis refuses bids
// meanwhile) and is counted, rather than settled with a hole.
func TestHotClosePersistsBidsFirst(t *testing.T) {
	e := newEnv(t, 8, Config{})

	a := e.newAuction(t, true, "100", 0)
	for i, amount := range []string{"101", "102", "103", "104"} {
		e.bid(t, a.ID, int64(i+1), amount)
	}
	e.setRedisEnd(t, a.ID, -time.Second)
	e.endInPostgres(t, a.ID)
	before := testutil.ToFloat64(e.closer.metrics.persistedAtClose)
	if n, err := e.closer.CloseDue(ctx); err != nil || n != 1 {
		t.Fatalf("closed %d: %v", n, err)
	}
	checkClosed(t, e.db, a.ID, ptr(4), "104.00", 4)
	if got := count(t, e.db, `SELECT count(*) FROM bid WHERE auction_id = $1 AND seq BETWEEN 1 AND 4`, a.ID); got != 4 {
		t.Fatalf("%d of 4 bids in PostgreSQL after the close", got)
	}
	if got := testutil.ToFloat64(e.closer.metrics.persistedAtClose) - before; got != 4 {
		t.Fatalf("closer counted %v bids persisted at close, want 4", got)
	}

	lost := e.newAuction(t, true, "100", 0)
	e.bid(t, lost.ID, 1, "101")
	e.bid(t, lost.ID, 2, "102")
	k := redisstore.KeysOf(lost.ID)
	head, err := e.rdb.XRangeN(ctx, k.Log, "-", "+", 1).Result()
	if err != nil || len(head) != 1 {
		t.Fatalf("log head: %v %v", head, err)
	}
	if err := e.rdb.XDel(ctx, k.Log, head[0].ID).Err(); err != nil {
		t.Fatal(err)
	}
	e.setRedisEnd(t, lost.ID, -time.Second)
	for pass := range 2 {
		// The bid the closer persists carries the end it was accepted
		// with, an hour away: this test moved Redis's end back by hand.
		e.endInPostgres(t, lost.ID)
		if n, err := e.closer.CloseDue(ctx); err != nil || n != 0 {
			t.Fatalf("pass %d closed %d: %v", pass, n, err)
		}
	}
	if r := readRow(t, e.db, lost.ID); r.status != bidgate.StatusOpen {
		t.Fatalf("auction with a lost bid is %s, want OPEN", r.status)
	}
	if got := testutil.ToFloat64(e.closer.metrics.waiting); got != 1 {
		t.Fatalf("bidgate_closer_unsettled_hot_auctions = %v, want 1", got)
	}
	if c := count(t, e.db, `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND topic = 'auction-closed'`, lost.ID); c != 0 {
		t.Fatalf("%d outbox rows for an unsettled auction", c)
	}
	if _, err := e.shards.PlaceBid(ctx, bidRequest(lost.ID, 9, "1000")); !errors.Is(err, bidgate.ErrAuctionClosed) {
		t.Fatalf("bid on the closed-in-Redis auction: %v, want %v", err, bidgate.ErrAuctionClosed)
	}
}

// A seller's cancel that reached Redis but not the row (the node died in
// between) is finished by the closer once the row's end passes: CANCELLED,
// one auction-cancelled event, no auction-closed one.
func TestHotCancelledInRedisOnly(t *testing.T) {
	e := newEnv(t, 4, Config{})
	a := e.newAuction(t, true, "100", 0)
	if _, err := redisstore.New(e.rdb).Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	e.endInPostgres(t, a.ID)
	for range 2 { // the second pass finds nothing left to do
		if _, err := e.closer.CloseDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r := readRow(t, e.db, a.ID); r.status != bidgate.StatusCancelled || r.closedAt == nil {
		t.Fatalf("row %+v, want CANCELLED", r)
	}
	if n := count(t, e.db, `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND topic = 'auction-cancelled'`, a.ID); n != 1 {
		t.Fatalf("%d auction-cancelled events, want 1", n)
	}
	if n := count(t, e.db, `SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND topic = 'auction-closed'`, a.ID); n != 0 {
		t.Fatalf("%d auction-closed events for a cancelled auction", n)
	}
}

// With --redis-wait-replicas the closer persists an ended hot auction's
// bids from its log only once the replicas hold them: on the single test
// Redis, which has none, the auction stays OPEN and the pass reports the
// outage; on a Redis Cluster (make test-cluster) it settles.
func TestHotCloseWaitsForReplicas(t *testing.T) {
	e := newEnv(t, 8, Config{Replication: redisstore.Replication{Replicas: 1, Timeout: 100 * time.Millisecond}})
	_, cluster := e.rdb.(*redis.ClusterClient)
	a := e.newAuction(t, true, "100", 0)
	e.bid(t, a.ID, 1, "101")
	e.bid(t, a.ID, 2, "102")
	e.setRedisEnd(t, a.ID, -time.Second)
	e.endInPostgres(t, a.ID)
	n, err := e.closer.CloseDue(ctx)
	if cluster {
		if err != nil || n != 1 {
			t.Fatalf("on a cluster closed %d: %v", n, err)
		}
		checkClosed(t, e.db, a.ID, ptr(2), "102.00", 2)
		return
	}
	if n != 0 || !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("without a replica closed %d: %v; want none and ErrNotReplicated", n, err)
	}
	if r := readRow(t, e.db, a.ID); r.status != bidgate.StatusOpen {
		t.Fatalf("the auction is %s, want OPEN until its bids are replicated", r.status)
	}
	if c := count(t, e.db, `SELECT count(*) FROM bid WHERE auction_id = $1`, a.ID); c != 0 {
		t.Fatalf("%d unreplicated bids written to PostgreSQL", c)
	}
}
