package closer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/persist/redisstore"
)

// insertColdAuctions inserts n cold auctions straight into the table (the
// shard would take seconds for thousands), ending within spreadMs
// milliseconds after the database clock plus startMs. Every fourth has no
// bid; the others have a leader, a price and a bid count of their own, so
// that each event can be told apart.
func insertColdAuctions(t testing.TB, db *pgxpool.Pool, n, startMs, spreadMs int) {
	t.Helper()
	_, err := db.Exec(ctx, `
INSERT INTO auction (seller_id, title, start_price, current_price, min_increment, leader_id, bid_count,
                     end_time, extend_window, extend_by)
SELECT 7, 'burst lot ' || g, 10,
       CASE WHEN g % 4 = 0 THEN 10 ELSE 10 + g + 0.05 END, 1,
       CASE WHEN g % 4 = 0 THEN NULL ELSE 1000 + g END,
       CASE WHEN g % 4 = 0 THEN 0 ELSE 1 + g % 7 END,
       t.base + (g % $3) * INTERVAL '1 millisecond', INTERVAL '0', INTERVAL '1 second'
  FROM generate_series(1, $1) g,
       (SELECT clock_timestamp() + $2 * INTERVAL '1 millisecond' AS base) t`, n, startMs, max(spreadMs, 1))
	if err != nil {
		t.Fatalf("insert %d auctions: %v", n, err)
	}
}

// TestShutdownMidCommit: the closer is stopped while PostgreSQL is in the
// middle of committing its batch (a deferred trigger makes the commit slow).
// The commit is awaited, not abandoned: the closes are made, counted and
// announced. An abandoned commit's outcome is unknown to the pass; when the
// server completed it, the closes went uncounted and unannounced.
func TestShutdownMidCommit(t *testing.T) {
	const n = 3
	e := newEnv(t, 4, Config{})
	if _, err := e.db.Exec(ctx, `
CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.1); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON outbox
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`); err != nil {
		t.Fatal(err)
	}
	insertColdAuctions(t, e.db, n, -1000, 1) // ended a second ago

	// A subscription per auction: their channels' slots differ.
	var subs []*redis.PubSub
	ids, err := e.db.Query(ctx, `SELECT id FROM auction`)
	if err != nil {
		t.Fatal(err)
	}
	for ids.Next() {
		var id int64
		if err := ids.Scan(&id); err != nil {
			t.Fatal(err)
		}
		sub := e.rdb.SSubscribe(ctx, redisstore.Channel(id))
		t.Cleanup(func() {
			if err := sub.Close(); err != nil {
				t.Error(err)
			}
		})
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	if err := ids.Err(); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.closer.Run(runCtx) }()
	committing := `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND state = 'active' AND query ILIKE 'commit%'`
	eventually(t, 30*time.Second, "the closer's commit under way", func() (int, bool) {
		c := count(t, e.db, committing)
		return c, c == 1
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "no commit under way", func() (int, bool) {
		c := count(t, e.db, committing)
		return c, c == 0
	})
	closed := count(t, e.db, `SELECT count(*) FROM auction WHERE status = 'CLOSED'`)
	if closed != n {
		t.Fatalf("%d auctions closed, want %d", closed, n)
	}
	if got := testutil.ToFloat64(e.closer.metrics.closed.WithLabelValues("cold")); got != n {
		t.Fatalf("the closer counted %v closes, PostgreSQL has %d", got, closed)
	}
	for _, sub := range subs {
		recvCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := sub.ReceiveMessage(recvCtx)
		cancel()
		if err != nil {
			t.Fatalf("the closed state was not announced: %v", err)
		}
		if u, err := redisstore.ParseUpdate(msg.Payload); err != nil || u.Status != bidgate.StatusClosed {
			t.Fatalf("announced %q (%v), want a CLOSED state", msg.Payload, err)
		}
	}
}

// TestCloseBurst: 10,000 cold auctions end within half a second; two closers
// running at once close every one exactly once, with its own winner.
func TestCloseBurst(t *testing.T) {
	const n = 10000
	e := newEnv(t, 16, Config{})
	insertColdAuctions(t, e.db, n, 1000, 500)

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	closers := []*Closer{e.closer, New(e.db, e.rdb, Config{}, prometheus.NewRegistry())}
	for i, c := range closers {
		wg.Go(func() {
			if err := c.Run(runCtx); err != nil {
				t.Errorf("closer %d: %v", i, err)
			}
		})
	}
	// Await the database clock past the last end, then the closers.
	if _, err := e.db.Exec(ctx, `SELECT pg_sleep_until(max(end_time)) FROM auction`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "no auction left open", func() (int, bool) {
		open := count(t, e.db, `SELECT count(*) FROM auction WHERE status = 'OPEN'`)
		return open, open == 0
	})
	stop()
	wg.Wait()

	var sinceLastEnd, sinceFirstEnd, worst time.Duration
	if err := e.db.QueryRow(ctx, `
SELECT max(closed_at) - max(end_time), max(closed_at) - min(end_time), max(closed_at - end_time)
  FROM auction`).Scan(&sinceLastEnd, &sinceFirstEnd, &worst); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d auctions ending within %v closed %v after the last end (longest wait of one auction %v)",
		n, sinceFirstEnd-sinceLastEnd, sinceLastEnd, worst)
	var byCloser []float64
	total := 0.0
	for _, c := range closers {
		v := testutil.ToFloat64(c.metrics.closed.WithLabelValues("cold"))
		byCloser = append(byCloser, v)
		total += v
	}
	t.Logf("closed per closer: %v", byCloser)
	if total != n {
		t.Fatalf("closers counted %v closes, want %d", total, n)
	}

	if early := count(t, e.db, `SELECT count(*) FROM auction WHERE closed_at IS NULL OR closed_at < end_time`); early != 0 {
		t.Fatalf("%d auctions closed before their end (or without closed_at)", early)
	}
	if c := count(t, e.db, `SELECT count(*) FROM outbox WHERE topic = 'auction-closed'`); c != n {
		t.Fatalf("%d outbox rows, want %d", c, n)
	}
	if c := count(t, e.db, `SELECT count(DISTINCT aggregate_id) FROM outbox WHERE topic = 'auction-closed'`); c != n {
		t.Fatalf("%d auctions in the outbox, want %d", c, n)
	}
	rows := map[int64]row{}
	res, err := e.db.Query(ctx, `SELECT id, status, current_price, leader_id, bid_count, end_time, closed_at FROM auction`)
	if err != nil {
		t.Fatal(err)
	}
	for res.Next() {
		var id int64
		var r row
		if err := res.Scan(&id, &r.status, &r.price, &r.leader, &r.bidCount, &r.endTime, &r.closedAt); err != nil {
			t.Fatal(err)
		}
		rows[id] = r
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	for _, o := range readOutbox(t, e.db, `true`) {
		checkEvent(t, o, o.aggregate, rows[o.aggregate])
	}
}

// TestBidRacingTheClose: bids arrive from several goroutines right at the
// end of an auction while the closer runs. Every accepted bid was accepted
// before the end, by the clock of the store that serialized it, and is
// counted: the closed row and its event name the highest accepted bid. Bids
// after the end are refused as closed.
func TestBidRacingTheClose(t *testing.T) {
	const runs, bidders = 20, 6
	e := newEnv(t, 16, Config{})
	for _, hot := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "hot"}[hot]
		t.Run(name, func(t *testing.T) {
			for run := range runs {
				raceOnce(t, e, hot, run, bidders, run == 0 || run == runs-1)
			}
		})
	}
}

func raceOnce(t *testing.T, e *env, hot bool, run, bidders int, logIt bool) {
	a := e.newAuction(t, hot, "100", 0)
	opening := e.bid(t, a.ID, 1, "101")
	// The end, a few tens of milliseconds ahead, is set with the deciding
	// store's clock; a hot auction's PostgreSQL row gets the same instant.
	var end time.Time
	if hot {
		end = time.UnixMicro(e.setRedisEnd(t, a.ID, 60*time.Millisecond))
		if _, err := e.db.Exec(ctx, `UPDATE auction SET end_time = $2 WHERE id = $1`, a.ID, end); err != nil {
			t.Fatal(err)
		}
	} else if err := e.db.QueryRow(ctx, `UPDATE auction SET end_time = clock_timestamp() + INTERVAL '60 milliseconds'
WHERE id = $1 RETURNING end_time`, a.ID).Scan(&end); err != nil {
		t.Fatal(err)
	}

	// Everyone starts a few milliseconds before the end, by the database clock.
	start := make(chan struct{})
	go func() {
		defer close(start)
		if _, err := e.db.Exec(ctx, `SELECT pg_sleep_until(end_time - INTERVAL '15 milliseconds') FROM auction WHERE id = $1`, a.ID); err != nil {
			t.Error(err)
		}
	}()

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted = []bidgate.Bid{opening}
		next     atomic.Int64
		refused  atomic.Int64
	)
	next.Store(101)
	for b := range bidders {
		wg.Go(func() {
			<-start
			for range 1000 {
				r := bidRequest(a.ID, int64(10+b), "1")
				r.Amount = decimal.NewFromInt(next.Add(1))
				res, err := e.shards.PlaceBid(ctx, r)
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, res.Bid)
					mu.Unlock()
				case errors.Is(err, bidgate.ErrAuctionClosed):
					refused.Add(1)
					return
				case errors.Is(err, bidgate.ErrBidTooLow), errors.Is(err, bidgate.ErrAlreadyLeading):
				default:
					t.Errorf("bid %s: %v", r.Amount, err)
					return
				}
			}
			t.Errorf("auction %d still open after 1000 bids", a.ID)
		})
	}
	wg.Go(func() {
		<-start
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			n, err := e.closer.CloseDue(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if n > 0 {
				return
			}
		}
		t.Errorf("auction %d not closed in 10s", a.ID)
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	high := accepted[0]
	for _, b := range accepted {
		if !b.AcceptedAt.Before(end) {
			t.Fatalf("run %d: bid %s (seq %d) accepted at %v, not before the end %v; it left the end at %v",
				run, b.Amount, b.Seq, b.AcceptedAt, end, b.EndTime)
		}
		if b.Amount.GreaterThan(high.Amount) {
			high = b
		}
	}
	r := checkClosed(t, e.db, a.ID, ptr(high.BidderID), bidgate.FormatMoney(high.Amount), int64(len(accepted)))
	if !r.endTime.Equal(end) || r.closedAt.Before(end) {
		t.Fatalf("run %d: end %v closed at %v, want end %v", run, r.endTime, r.closedAt, end)
	}
	stored := 0
	if hot {
		n, err := e.rdb.XLen(ctx, redisstore.KeysOf(a.ID).Log).Result()
		if err != nil {
			t.Fatalf("run %d: log length: %v", run, err)
		}
		stored = int(n)
	} else {
		stored = count(t, e.db, `SELECT count(*) FROM bid WHERE auction_id = $1`, a.ID)
	}
	if stored != len(accepted) {
		t.Fatalf("run %d: %d bids stored, %d accepted", run, stored, len(accepted))
	}
	if _, err := e.shards.PlaceBid(ctx, bidRequest(a.ID, 99, "1000000")); !errors.Is(err, bidgate.ErrAuctionClosed) {
		t.Fatalf("run %d: bid after the close: %v, want %v", run, err, bidgate.ErrAuctionClosed)
	}
	if logIt {
		t.Logf("run %d: %d bids accepted, %d refused as closed, last %v before end", run, len(accepted), refused.Load(), end.Sub(high.AcceptedAt))
	}
}

// TestColdEventPayload pins the JSON of an auction-closed event: two
// decimals in finalPrice, winnerId null when nobody bid.
func TestColdEventPayload(t *testing.T) {
	e := newEnv(t, 4, Config{})
	tests := []struct {
		name   string
		start  string
		bids   []string
		winner *int64
		price  string
	}{
		{"no bid", "1250", nil, nil, "1250.00"},
		{"two bids", "1000", []string{"1001.5", "1250"}, ptr(2), "1250.00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := e.newAuction(t, false, tc.start, 0)
			for i, amount := range tc.bids {
				e.bid(t, a.ID, int64(i+1), amount)
			}
			e.endInPostgres(t, a.ID)
			sub := e.rdb.SSubscribe(ctx, redisstore.Channel(a.ID))
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil { // the subscription is in place
				t.Fatal(err)
			}
			// The seller's notice is published with the close.
			seller := e.rdb.SSubscribe(ctx, redisstore.NoticeChannel(a.SellerID))
			defer seller.Close()
			if _, err := seller.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := e.closer.CloseDue(ctx); err != nil {
				t.Fatal(err)
			}
			r := checkClosed(t, e.db, a.ID, tc.winner, tc.price, int64(len(tc.bids)))

			// Viewers get the final state.
			recvCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			msg, err := sub.ReceiveMessage(recvCtx)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := redisstore.ParseUpdate(msg.Payload)
			if err != nil {
				t.Fatal(err)
			}
			u := parsed.StateUpdate()
			if u.Status != bidgate.StatusClosed || u.CurrentPrice != tc.price || !equalLeader(leaderOf(u), tc.winner) ||
				u.BidCount != int64(len(tc.bids)) {
				t.Fatalf("closed state update %s", msg.Payload)
			}
			notice, err := seller.ReceiveMessage(recvCtx)
			if err != nil {
				t.Fatal(err)
			}
			var n bidgate.Notice
			if err := json.Unmarshal([]byte(notice.Payload), &n); err != nil {
				t.Fatal(err)
			}
			want := bidgate.NoticeUnsold
			if tc.winner != nil {
				want = bidgate.NoticeSold
			}
			if n.Type != want || n.UserID != a.SellerID || n.AuctionID != a.ID || n.Price != tc.price || n.Validate() != nil {
				t.Fatalf("the seller's notice %s, want %s at %s", notice.Payload, want, tc.price)
			}
			o := readOutbox(t, e.db, `aggregate_id = $1`, a.ID)[0]
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(o.payload, &fields); err != nil {
				t.Fatal(err)
			}
			winner := "null"
			if tc.winner != nil {
				winner = fmt.Sprint(*tc.winner)
			}
			if string(fields["finalPrice"]) != `"`+tc.price+`"` || string(fields["winnerId"]) != winner ||
				string(fields["auctionId"]) != fmt.Sprint(a.ID) || len(fields) != 5 {
				t.Fatalf("payload %s", o.payload)
			}
			if r.closedAt.Before(r.endTime) {
				t.Fatalf("closed at %v before the end %v", r.closedAt, r.endTime)
			}
		})
	}
}
