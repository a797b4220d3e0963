package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/persist/pgstore"
)

// PendingEvents hands each topic's unpublished rows out oldest first and
// marks delivered exactly the notices stored already (never another
// topic's row), probing notification's id index per row: hashing the
// whole table for every pass was its cost under load.
func TestPendingEventsProbeStoredNotices(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.New(t, 4)
	if _, err := db.Exec(ctx, `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
SELECT 'n-' || i, i, 'outbid', 1, 'lot', 1.00, clock_timestamp() FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	// 300 notices, the first 100 stored; 5 closes whose payload ids
	// happen to match stored notices.
	s := &pgstore.Store{DB: db}
	var notices, closes []pgstore.Event
	for i := 19_901; i <= 20_200; i++ {
		notices = append(notices, pgstore.Event{AggregateID: 1, Payload: fmt.Appendf(nil, `{"id": "n-%d"}`, i)})
	}
	for i := 1; i <= 5; i++ {
		closes = append(closes, pgstore.Event{AggregateID: int64(i), Payload: fmt.Appendf(nil, `{"id": "n-%d"}`, i)})
	}
	if err := s.AddEvents(ctx, bidgate.TopicBidNotifications, notices); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEvents(ctx, bidgate.TopicAuctionClosed, closes); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "ANALYZE notification, outbox"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic          string
		limit          int
		want, stored   int
		firstDelivered bool
	}{
		{bidgate.TopicBidNotifications, 500, 300, 100, true},
		{bidgate.TopicBidNotifications, 50, 50, 50, true},
		{bidgate.TopicAuctionClosed, 500, 5, 0, false},
	} {
		t.Run(fmt.Sprintf("%s, up to %d", tc.topic, tc.limit), func(t *testing.T) {
			var events []pgstore.Event
			err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) (err error) {
				events, err = (&pgstore.Store{DB: tx}).PendingEvents(ctx, tc.topic, tc.limit)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != tc.want {
				t.Fatalf("%d rows, want %d", len(events), tc.want)
			}
			stored := 0
			for i, e := range events {
				if i > 0 && e.ID <= events[i-1].ID {
					t.Fatalf("row %d (id %d) after id %d: not oldest first", i, e.ID, events[i-1].ID)
				}
				if e.Delivered {
					stored++
				}
			}
			if stored != tc.stored || events[0].Delivered != tc.firstDelivered {
				t.Errorf("%d delivered, the first %v; want %d, %v", stored, events[0].Delivered, tc.stored, tc.firstDelivered)
			}
		})
	}
	requireNoticeProbes(t, "the stored-notice look-up", explain(t, db, pgstore.PendingOutboxSQL, bidgate.TopicBidNotifications, 500))
}
