package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/persist"
)

// A pruner deletes a backlog bigger than its batch statement after
// statement, not a batch per pass, and keeps the rows inside the
// retention.
func TestOutboxPrunerDeletesItsBacklog(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 2)
	if _, err := db.Exec(ctx, `INSERT INTO outbox (topic, aggregate_id, payload, published_at)
SELECT 'auction-closed', i, '{}', clock_timestamp() - CASE WHEN i <= 12 THEN interval '2 hours' ELSE interval '1 minute' END
  FROM generate_series(1, 15) i`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := persist.NewOutboxPruner(db, persist.PruneConfig{Keep: time.Hour, Batch: 5, Every: time.Hour}, reg)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	await.Until(t, 10*time.Second, "12 rows pruned", nil, func() (float64, bool) {
		n := testmetrics.Value(t, reg, "bidgate_outbox_pruned_total")
		return n, n == 12
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	var all, left int
	if err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE published_at > clock_timestamp() - interval '1 hour') FROM outbox`).Scan(&all, &left); err != nil {
		t.Fatal(err)
	}
	if left != 3 || all != 3 {
		t.Fatalf("%d rows left (%d inside the retention); want the 3 inside it", all, left)
	}
}
