package closer

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bidgate/internal/testmetrics"
	"bidgate/persist/redisstore"
)

// A close tells the users listening on /ws/me before the others: their
// notices are stored (and published) in a chunk of their own, first.
func TestCloseToldListenersFirst(t *testing.T) {
	e := newEnv(t, 4, Config{})
	for _, hot := range []bool{false, true} {
		a := e.newAuction(t, hot, "10", 0)
		for i, bidder := range []int64{301, 302, 303, 304} {
			e.bid(t, a.ID, bidder, []string{"11", "12", "13", "14"}[i])
		}
		if err := redisstore.New(e.rdb).MarkListening(ctx, 302, 9_000_007); err != nil {
			t.Fatal(err)
		}
		if hot {
			e.setRedisEnd(t, a.ID, -time.Second)
		}
		e.endInPostgres(t, a.ID)
		if _, err := e.closer.CloseDue(ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := e.db.Query(ctx, `SELECT type || ':' || user_id FROM notification WHERE auction_id = $1 AND type <> 'outbid' ORDER BY n`, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			order = append(order, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(order) != 5 {
			t.Fatalf("hot %v: stored %v, want 5 close notices", hot, order)
		}
		first := order[:2]
		slices.Sort(first)
		if !slices.Equal(first, []string{"lost:302", "sold:9000007"}) {
			t.Fatalf("hot %v: stored in the order %v, want the listeners' (lost:302, sold:9000007) first", hot, order)
		}
		if got, want := noticesOf(t, e.db, a.ID), []string{"lost:301", "lost:302", "lost:303", "sold:9000007", "won:304"}; !slices.Equal(got, want) {
			t.Fatalf("hot %v: outbox notices %v, want %v", hot, got, want)
		}
	}
}

// A closer that dies between the close's commit and its notices leaves
// the debt in close_notice; a later pass (of any closer, several at once)
// writes the notices to the outbox once, and stores them.
func TestCloseNoticesLeftAreTold(t *testing.T) {
	e := newEnv(t, 8, Config{})
	dying := New(e.db, e.rdb, Config{}, prometheus.NewRegistry())
	dying.silent = true
	for round := range 5 {
		a := e.newAuction(t, round%2 == 1, "10", 0)
		e.bid(t, a.ID, 401, "11")
		e.bid(t, a.ID, 402, "12")
		if round%2 == 1 {
			e.setRedisEnd(t, a.ID, -time.Second)
		}
		e.endInPostgres(t, a.ID)
		if n, err := dying.CloseDue(ctx); err != nil || n != 1 {
			t.Fatalf("round %d: closed %d, %v", round, n, err)
		}
		if got := noticesOf(t, e.db, a.ID); len(got) != 0 {
			t.Fatalf("round %d: notices %v in the outbox before anyone told them", round, got)
		}
		if n := count(t, e.db, `SELECT count(*) FROM close_notice WHERE auction_id = $1`, a.ID); n != 1 {
			t.Fatalf("round %d: %d close_notice rows, want 1", round, n)
		}

		regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
		var wg sync.WaitGroup
		errs := make([]error, len(regs))
		for i, reg := range regs {
			c := New(e.db, e.rdb, Config{NoticeGrace: time.Nanosecond}, reg)
			wg.Go(func() { _, errs[i] = c.CloseDue(ctx) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if got, want := noticesOf(t, e.db, a.ID), []string{"lost:401", "sold:9000007", "won:402"}; !slices.Equal(got, want) {
			t.Fatalf("round %d: outbox notices %v, want %v, each once", round, got, want)
		}
		if n := count(t, e.db, `SELECT count(*) FROM close_notice`); n != 0 {
			t.Fatalf("round %d: %d close_notice rows left", round, n)
		}
		told := 0.0
		for _, reg := range regs {
			told += testmetrics.Value(t, reg, "bidgate_closer_left_notices_total")
		}
		if told < 1 {
			t.Fatalf("round %d: bidgate_closer_left_notices_total %v, want at least 1", round, told)
		}
	}
}
