package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/insert_outbox.sql
	insertOutboxSQL string
	//go:embed sql/pending_outbox.sql
	pendingOutboxSQL string
	//go:embed sql/mark_published.sql
	markPublishedSQL string
	//go:embed sql/outbox_backlog.sql
	outboxBacklogSQL string
	//go:embed sql/prune_outbox.sql
	pruneOutboxSQL string
	//go:embed sql/vacuum_outbox_pending.sql
	vacuumOutboxPendingSQL string
	//go:embed sql/lead_outbox.sql
	leadOutboxSQL string
	//go:embed sql/unlock_outbox.sql
	unlockOutboxSQL string
)

// LeadOutbox tries to make conn's session the one outbox relay of topic
// that listens for its rows, and reports whether it is; the lead lasts
// until UnlockOutbox or the session's end. The other relays only poll:
// every commit woke every node's relay for a pass, and SKIP LOCKED left
// all but one of them empty-handed.
func LeadOutbox(ctx context.Context, conn *pgx.Conn, topic string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, leadOutboxSQL, topic).Scan(&ok); err != nil {
		return false, fmt.Errorf("lead the %s outbox: %w", topic, err)
	}
	return ok, nil
}

// UnlockOutbox gives up the lead LeadOutbox took on conn.
func UnlockOutbox(ctx context.Context, conn *pgx.Conn, topic string) error {
	if _, err := conn.Exec(ctx, unlockOutboxSQL, topic); err != nil {
		return fmt.Errorf("give up the lead of the %s outbox: %w", topic, err)
	}
	return nil
}

// OutboxChannel is the NOTIFY channel that wakes topic's leading outbox
// relay (LeadOutbox): one per topic, so a relay is not woken by rows it
// does not publish (every outbid notice used to wake the auction-closed
// and -cancelled relays too, each for a pass that found nothing). The
// statements that
// add rows (sql/insert_outbox.sql, and the notices of sql/cold_bid.sql and
// sql/insert_bids.sql) spell it too.
func OutboxChannel(topic string) string { return "outbox:" + topic }

// Event is one outbox row: a message for topic, keyed by its aggregate.
type Event struct {
	ID          int64 // set by PendingEvents
	AggregateID int64
	Payload     []byte // JSON
	// Delivered (set by PendingEvents) marks a notice stored already: the
	// row needs marking published, not sending.
	Delivered bool
}

// AddEvents writes outbox rows for topic and notifies its OutboxChannel; inside
// the transaction that made them true, so an event exists if and only if
// its change committed.
func (s *Store) AddEvents(ctx context.Context, topic string, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	ids, payloads := make([]int64, len(events)), make([]string, len(events))
	for i, e := range events {
		ids[i], payloads[i] = e.AggregateID, string(e.Payload)
	}
	var n int64
	if err := s.DB.QueryRow(ctx, insertOutboxSQL, topic, ids, payloads).Scan(&n); err != nil {
		return fmt.Errorf("write %d outbox rows: %w", len(events), err)
	}
	if n != int64(len(events)) {
		return fmt.Errorf("write %d outbox rows: %d written", len(events), n)
	}
	return nil
}

// PendingEvents locks up to limit unpublished rows of topic, oldest first,
// skipping rows another relay holds; s.DB must be a transaction.
func (s *Store) PendingEvents(ctx context.Context, topic string, limit int) ([]Event, error) {
	rows, err := s.DB.Query(ctx, pendingOutboxSQL, topic, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.ID, &e.AggregateID, &e.Payload, &e.Delivered)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return events, nil
}

// MarkPublished records that topic's outbox rows ids reached Kafka.
func (s *Store) MarkPublished(ctx context.Context, topic string, ids []int64) error {
	if _, err := s.DB.Exec(ctx, markPublishedSQL, topic, ids); err != nil {
		return fmt.Errorf("mark %d outbox rows published: %w", len(ids), err)
	}
	return nil
}

// VacuumPending clears the outbox's pending entries of the rows marked
// published since the last vacuum; s.DB must not be a transaction.
func (s *Store) VacuumPending(ctx context.Context) error {
	if _, err := s.DB.Exec(ctx, vacuumOutboxPendingSQL); err != nil {
		return fmt.Errorf("vacuum outbox_pending: %w", err)
	}
	return nil
}

// PruneEvents deletes up to limit published rows older than keep from the
// head of the outbox (never a notice the sweep has not passed) and returns
// how many it deleted. Several may run at once.
func (s *Store) PruneEvents(ctx context.Context, keep time.Duration, limit int) (int64, error) {
	tag, err := s.DB.Exec(ctx, pruneOutboxSQL, keep.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune published outbox rows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// OutboxBacklog reports topic's unpublished rows and the age in seconds of
// the oldest, by the database clock.
func (s *Store) OutboxBacklog(ctx context.Context, topic string) (pending int64, ageSeconds float64, err error) {
	if err := s.DB.QueryRow(ctx, outboxBacklogSQL, topic).Scan(&pending, &ageSeconds); err != nil {
		return 0, 0, fmt.Errorf("read outbox backlog: %w", err)
	}
	return pending, ageSeconds, nil
}
