package persist

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// One wake-up for many notifications: after the first, gather takes every
// notification that came meanwhile, so the next wait waits.
func TestListenerGathersNotifications(t *testing.T) {
	db, _ := testdb.New(t, 4)
	ctx := context.Background()
	l := &listener{db: db, channel: pgstore.OutboxChannel, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer l.close()
	l.listen(ctx)
	if l.conn == nil {
		t.Fatal("not listening")
	}
	for range 5 {
		if _, err := db.Exec(ctx, "SELECT pg_notify($1, '')", pgstore.OutboxChannel); err != nil {
			t.Fatal(err)
		}
	}
	if !l.wait(ctx, 10*time.Second) {
		t.Fatal("no notification")
	}
	l.gather(ctx, 500*time.Millisecond) // the other four arrive meanwhile
	if l.wait(ctx, 100*time.Millisecond) {
		t.Fatal("a notification left after gather: each would cost a pass")
	}
	if l.conn == nil {
		t.Fatal("gather dropped the connection")
	}
}
