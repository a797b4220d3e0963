package closer

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"bidgate/internal/retry"
	"bidgate/internal/testport"
)

// A closer whose database is down backs off instead of trying again every
// Interval: with an Interval of 1 ms it would run hundreds of failing passes
// a second, and every node would hammer the database as it comes back. The
// bound is the most passes retry's shortest waits allow in the time the
// closer ran, so a slow machine only makes the count smaller.
func TestRunBacksOffWhileFailing(t *testing.T) {
	e := newEnv(t, 2, Config{})
	cfg := e.db.Config().Copy()
	cfg.ConnConfig.Port = uint16(testport.Free(t)) // nothing listens there
	down, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	c := New(down, e.rdb, Config{Interval: time.Millisecond, Log: quiet}, prometheus.NewRegistry())

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(runCtx) }()
	const awaited = 4
	eventually(t, 30*time.Second, "failed close passes", func() (float64, bool) {
		n := testutil.ToFloat64(c.metrics.errors.WithLabelValues("due"))
		return n, n >= awaited
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ran := time.Since(start)

	passes := testutil.ToFloat64(c.metrics.passes)
	if most := mostPasses(ran); passes > most {
		t.Fatalf("%v failing passes in %v, want at most %v (one per back-off)", passes, ran, most)
	}
	if failed := testutil.ToFloat64(c.metrics.errors.WithLabelValues("due")); failed != passes {
		t.Fatalf("%v failed looks for due work in %v passes, want one per pass", failed, passes)
	}
}

// mostPasses is how many passes fit in d when every failure is followed by
// the shortest wait retry's default back-off can draw (its jitter is ±25%).
func mostPasses(d time.Duration) float64 {
	passes := 1.0
	wait, elapsed := retry.DefaultMin, time.Duration(0)
	for {
		elapsed += wait * 3 / 4
		if elapsed > d {
			return passes
		}
		passes++
		wait = min(2*wait, retry.DefaultMax)
	}
}
