package closer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate"
	"bidgate/persist"
	pkafka "bidgate/persist/kafka"
	"bidgate/persist/pgstore"
)

// statements counts, on a pool, the outbox relay's passes (the locking
// read of pending rows) and its backlog reads.
type statements struct{ passes, backlogs atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.Contains(q.SQL, "SKIP LOCKED"):
		s.passes.Add(1)
	case strings.Contains(q.SQL, "count(*)"):
		s.backlogs.Add(1)
	}
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// An idle outbox relay, leading its topic or not, reads the backlog after
// each poll and runs no pass while it is empty: every node polls every
// topic, and a pass is a transaction of three statements. Rows that come
// without a notification are still published by the next poll.
func TestIdleOutboxRelayOnlyReadsItsBacklog(t *testing.T) {
	for _, leading := range []bool{true, false} {
		t.Run(map[bool]string{true: "leading", false: "standby"}[leading], func(t *testing.T) {
			e := newEnv(t, 4, Config{})
			broker := startBroker(t, 0)
			if !leading {
				other, err := pgx.Connect(ctx, e.dbURL)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { other.Close(context.Background()) })
				if leads, err := pgstore.LeadOutbox(ctx, other, bidgate.TopicAuctionClosed); err != nil || !leads {
					t.Fatalf("another session to lead: %v, %v", leads, err)
				}
			}
			var seen statements
			cfg := e.db.Config().Copy()
			cfg.ConnConfig.Tracer = &seen
			db, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
			t.Cleanup(func() { w.Close() })
			relay := persist.NewOutboxRelay(db, w, persist.OutboxConfig{PollInterval: 5 * time.Millisecond,
				StandbyPoll: 5 * time.Millisecond, Log: quiet}, prometheus.NewRegistry())
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- relay.Run(runCtx) }()
			t.Cleanup(func() {
				stop()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})

			eventually(t, 10*time.Second, "20 backlog reads", func() (int64, bool) {
				n := seen.backlogs.Load()
				return n, n >= 20
			})
			if passes := seen.passes.Load(); passes > 1 {
				t.Fatalf("%d passes while nothing was pending, want the first one only", passes)
			}
			insertEvents(t, e.db, 10)
			eventually(t, 10*time.Second, "the events published", func() (int, bool) { return unpublishedNone(t, e.db) })
		})
	}
}
