package closer

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/persist/pgstore"
)

// A pass's look for due work sees each kind of work, and a pass that finds
// none takes the pool once: running every stage took it three times more
// (two transactions and a query); a look that missed work leaves it undone.
func TestPassRunsOnlyTheDueStages(t *testing.T) {
	e := newEnv(t, 4, Config{})
	own, err := pgxpool.NewWithConfig(ctx, e.db.Config().Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(own.Close)
	c := New(own, e.rdb, Config{NoticeGrace: time.Nanosecond, Log: quiet}, prometheus.NewRegistry())
	silent := New(e.db, e.rdb, Config{Log: quiet}, prometheus.NewRegistry())
	silent.silent = true

	ended := func(hot bool) bidgate.Auction {
		a := e.newAuction(t, hot, "10", 0)
		e.bid(t, a.ID, 501, "11")
		if hot {
			e.setRedisEnd(t, a.ID, -time.Second)
		}
		e.endInPostgres(t, a.ID)
		return a
	}
	for _, tc := range []struct {
		name    string
		arrange func() (closed int64) // the auction the pass must close, or 0
		due     pgstore.DueWork
	}{
		{name: "nothing", arrange: func() int64 { return 0 }},
		{name: "open, not ended", arrange: func() int64 { e.newAuction(t, false, "10", 0); e.newAuction(t, true, "10", 0); return 0 }},
		{name: "cold ended", arrange: func() int64 { return ended(false).ID }, due: pgstore.DueWork{Cold: true}},
		{name: "hot ended", arrange: func() int64 { return ended(true).ID }, due: pgstore.DueWork{Hot: true}},
		{name: "a close owes its notices", arrange: func() int64 {
			ended(false)
			if n, err := silent.CloseDue(ctx); err != nil || n != 1 {
				t.Fatalf("the silent closer closed %d, %v", n, err)
			}
			return 0
		}, due: pgstore.DueWork{Notices: true}},
		{name: "cold and hot ended", arrange: func() int64 { ended(true); return ended(false).ID }, due: pgstore.DueWork{Cold: true, Hot: true}},
	} {
		closed := tc.arrange()
		due, err := (&pgstore.Store{DB: own}).Due(ctx, time.Nanosecond)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if due != tc.due {
			t.Fatalf("%s: due %+v, want %+v", tc.name, due, tc.due)
		}
		before := own.Stat().AcquireCount()
		if _, err := c.CloseDue(ctx); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if takes := own.Stat().AcquireCount() - before; tc.due == (pgstore.DueWork{}) && takes != 1 {
			t.Fatalf("%s: a pass with nothing due took the pool %d times, want once", tc.name, takes)
		}
		if closed != 0 {
			if r := readRow(t, e.db, closed); r.status != bidgate.StatusClosed {
				t.Fatalf("%s: auction %d is %s after the pass", tc.name, closed, r.status)
			}
		}
		if due, err := (&pgstore.Store{DB: own}).Due(ctx, time.Nanosecond); err != nil || due != (pgstore.DueWork{}) {
			t.Fatalf("%s: after the pass, due %+v, %v; want nothing", tc.name, due, err)
		}
	}
}
