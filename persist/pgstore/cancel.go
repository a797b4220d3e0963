package pgstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate"
)

var (
	//go:embed sql/cancel_cold.sql
	cancelColdSQL string
	//go:embed sql/settle_cancelled.sql
	settleCancelledSQL string
)

// Cancelled is an auction as the statement that cancelled it returned it.
type Cancelled struct {
	ID, SellerID int64
	At           time.Time
}

// CancelCold cancels an open cold auction that has no bid and has not
// ended by the database clock; ok is false when the row did not qualify.
func (s *Store) CancelCold(ctx context.Context, id int64) (c Cancelled, ok bool, err error) {
	err = s.DB.QueryRow(ctx, cancelColdSQL, id).Scan(&c.ID, &c.SellerID, &c.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("cancel auction %d: %w", id, err)
	}
	return c, true, nil
}

// SettleCancelled marks hot auctions Redis cancelled as CANCELLED, and
// returns those it changed (not those already so).
func (s *Store) SettleCancelled(ctx context.Context, ids []int64) ([]Cancelled, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.DB.Query(ctx, settleCancelledSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("settle %d cancelled auctions: %w", len(ids), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Cancelled])
	if err != nil {
		return nil, fmt.Errorf("settle %d cancelled auctions: %w", len(ids), err)
	}
	return out, nil
}

// AddCancelEvents writes one outbox row for topic per cancelled auction,
// inside the transaction that cancelled it.
func (s *Store) AddCancelEvents(ctx context.Context, topic string, cancelled []Cancelled) error {
	events := make([]Event, len(cancelled))
	for i, c := range cancelled {
		b, err := json.Marshal(bidgate.AuctionCancelled{AuctionID: c.ID, SellerID: c.SellerID, CancelledAt: c.At.UTC()})
		if err != nil {
			return fmt.Errorf("encode the cancel event of auction %d: %w", c.ID, err)
		}
		events[i] = Event{AggregateID: c.ID, Payload: b}
	}
	return s.AddEvents(ctx, topic, events)
}
