package pgstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/due_work.sql
	dueWorkSQL string
	//go:embed sql/close_cold.sql
	closeColdSQL string
	//go:embed sql/due_hot.sql
	dueHotSQL string
	//go:embed sql/settle_hot.sql
	settleHotSQL string
	//go:embed sql/extend_hot.sql
	extendHotSQL string
	//go:embed sql/add_close_notices.sql
	addCloseNoticesSQL string
)

// Closed is an auction as the statement that closed it returned it: the
// settled row, the single source of its event and final state update.
type Closed struct {
	ID       int64
	Leader   *int64 // nil when nobody bid
	Price    decimal.Decimal
	BidCount int64
	EndTime  time.Time
	ClosedAt time.Time
	Reserve  decimal.NullDecimal // the hidden reserve, if any
}

// Event is the auction-closed payload. The winner and price come from the
// row the closing statement settled, so every copy the relay sends (it
// delivers at least once) names the same winner.
func (c Closed) Event() bidgate.AuctionClosed {
	e := bidgate.AuctionClosed{AuctionID: c.ID, WinnerID: c.Leader, FinalPrice: bidgate.FormatMoney(c.Price),
		ClosedAt: c.ClosedAt.UTC(), BidCount: c.BidCount}
	if c.Reserve.Valid {
		met := c.Leader != nil && c.Price.GreaterThanOrEqual(c.Reserve.Decimal)
		e.ReserveMet = &met
		if !met {
			e.WinnerID = nil // below the reserve nobody wins
		}
	}
	return e
}

// AddClosedEvents writes one outbox row for topic per closed auction,
// inside the transaction that closed it, and records that the closes owe
// their notices (close_notice): the caller reads them (CloseNotices) and
// writes them to the outbox (WriteCloseNotices) once it committed, or in
// the same transaction when they are few.
func (s *Store) AddClosedEvents(ctx context.Context, topic string, closed []Closed) error {
	events := make([]Event, len(closed))
	for i, c := range closed {
		b, err := json.Marshal(c.Event())
		if err != nil {
			return fmt.Errorf("encode the auction-closed event of auction %d: %w", c.ID, err)
		}
		events[i] = Event{AggregateID: c.ID, Payload: b}
	}
	if err := s.AddEvents(ctx, topic, events); err != nil {
		return err
	}
	return s.oweCloseNotices(ctx, closed)
}

// oweCloseNotices records that closes owe their notices (won, lost, sold
// or unsold), with their events' winners: below the reserve nobody wins.
func (s *Store) oweCloseNotices(ctx context.Context, closed []Closed) error {
	if len(closed) == 0 {
		return nil
	}
	ids, winners := make([]int64, len(closed)), make([]int64, len(closed))
	prices, at := make([]pgtype.Numeric, len(closed)), make([]time.Time, len(closed))
	for i, c := range closed {
		e := c.Event()
		ids[i], prices[i], at[i] = c.ID, numeric(c.Price), c.ClosedAt
		if e.WinnerID != nil {
			winners[i] = *e.WinnerID
		}
	}
	if _, err := s.DB.Exec(ctx, addCloseNoticesSQL, ids, winners, prices, at); err != nil {
		return fmt.Errorf("record the notices owed by %d closed auctions: %w", len(closed), err)
	}
	return nil
}

// DueWork is what a close pass has to do, as the database saw it at one
// instant.
type DueWork struct {
	Cold, Hot bool // an open auction of that mode whose end has passed
	Notices   bool // a close that owes its notices longer than the grace
}

// Due reports the work due, in one round trip, without locking anything:
// most passes of an idle cluster find none, and every node runs them.
func (s *Store) Due(ctx context.Context, noticeGrace time.Duration) (DueWork, error) {
	var d DueWork
	if err := s.DB.QueryRow(ctx, dueWorkSQL, noticeGrace.Seconds()).Scan(&d.Cold, &d.Hot, &d.Notices); err != nil {
		return DueWork{}, fmt.Errorf("look for due closes: %w", err)
	}
	return d, nil
}

// CloseDueCold closes up to limit cold auctions whose end has passed by the
// database clock, skipping rows another closer holds.
func (s *Store) CloseDueCold(ctx context.Context, limit int) ([]Closed, error) {
	rows, err := s.DB.Query(ctx, closeColdSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("close cold auctions: %w", err)
	}
	return collectClosed(rows)
}

// DueHot is a hot auction whose PostgreSQL end has passed, as its locked
// row has it.
type DueHot struct {
	ID       int64
	Price    decimal.Decimal
	Leader   *int64
	BidCount int64
	EndTime  time.Time
	// Persisted is how far its bids are in PostgreSQL without a gap.
	Persisted int64
}

// LockDueHot locks up to limit open hot auctions whose end has passed by
// the database clock, skipping rows another closer holds; s.DB must be a
// transaction.
func (s *Store) LockDueHot(ctx context.Context, limit int) ([]DueHot, error) {
	rows, err := s.DB.Query(ctx, dueHotSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("lock due hot auctions: %w", err)
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DueHot, error) {
		var a DueHot
		err := row.Scan(&a.ID, &a.Price, &a.Leader, &a.BidCount, &a.EndTime, &a.Persisted)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("lock due hot auctions: %w", err)
	}
	return due, nil
}

// Extension moves an open auction's end later (never earlier).
type Extension struct {
	ID    int64
	EndUs int64 // the new end, Unix microseconds
}

// ExtendHot moves the ends of open hot auctions.
func (s *Store) ExtendHot(ctx context.Context, ext []Extension) error {
	if len(ext) == 0 {
		return nil
	}
	ids, ends := make([]int64, len(ext)), make([]int64, len(ext))
	for i, e := range ext {
		ids[i], ends[i] = e.ID, e.EndUs
	}
	if _, err := s.DB.Exec(ctx, extendHotSQL, ids, ends); err != nil {
		return fmt.Errorf("move the end of %d auctions: %w", len(ext), err)
	}
	return nil
}

// Settlement is a hot auction's final state as Redis decided it.
type Settlement struct {
	ID       int64
	Price    decimal.Decimal
	Leader   *int64 // nil when nobody bid
	BidCount int64
	EndUs    int64 // Unix microseconds
}

// SettleHot closes open hot auctions with their final state.
func (s *Store) SettleHot(ctx context.Context, settle []Settlement) ([]Closed, error) {
	if len(settle) == 0 {
		return nil, nil
	}
	n := len(settle)
	ids, prices, leaders := make([]int64, n), make([]string, n), make([]*int64, n)
	counts, ends := make([]int64, n), make([]int64, n)
	for i, a := range settle {
		ids[i], prices[i], leaders[i] = a.ID, bidgate.FormatMoney(a.Price), a.Leader
		counts[i], ends[i] = a.BidCount, a.EndUs
	}
	rows, err := s.DB.Query(ctx, settleHotSQL, ids, prices, leaders, counts, ends)
	if err != nil {
		return nil, fmt.Errorf("settle %d hot auctions: %w", n, err)
	}
	return collectClosed(rows)
}

func collectClosed(rows pgx.Rows) ([]Closed, error) {
	closed, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Closed, error) {
		var a Closed
		err := row.Scan(&a.ID, &a.Leader, &a.Price, &a.BidCount, &a.EndTime, &a.ClosedAt, &a.Reserve)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read closed auctions: %w", err)
	}
	return closed, nil
}
