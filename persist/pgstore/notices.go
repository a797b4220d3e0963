package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"bidgate"
)

var (
	//go:embed sql/store_notices.sql
	storeNoticesSQL string
	//go:embed sql/lock_notices.sql
	lockNoticesSQL string
	//go:embed sql/delete_old_notices.sql
	deleteOldNoticesSQL string
)

// StoreNotices stores notices (validated) in tx, skipping any already
// stored, and returns the ids it stored. It holds a lock until tx ends, so
// that notices are numbered in the order they commit.
func StoreNotices(ctx context.Context, tx pgx.Tx, notices []bidgate.Notice) (map[string]bool, error) {
	n := len(notices)
	ids, users, types := make([]string, n), make([]int64, n), make([]string, n)
	auctions, titles := make([]int64, n), make([]string, n)
	prices, maxes, at := make([]pgtype.Numeric, n), make([]pgtype.Numeric, n), make([]time.Time, n) // a max not Valid: NULL
	for i, x := range notices {
		price, err := bidgate.ParseMoney(x.Price)
		if err != nil {
			return nil, fmt.Errorf("notice %s: price: %w", x.ID, err)
		}
		if x.MaxAmount != "" {
			max, err := bidgate.ParseMoney(x.MaxAmount)
			if err != nil {
				return nil, fmt.Errorf("notice %s: maxAmount: %w", x.ID, err)
			}
			maxes[i] = numeric(max)
		}
		ids[i], users[i], types[i], auctions[i], titles[i], prices[i], at[i] = x.ID, x.UserID, string(x.Type), x.AuctionID, x.Title, numeric(price), x.At
	}
	if _, err := tx.Exec(ctx, lockNoticesSQL); err != nil {
		return nil, fmt.Errorf("lock the notices: %w", err)
	}
	rows, err := tx.Query(ctx, storeNoticesSQL, ids, users, types, auctions, titles, prices, maxes, at)
	if err != nil {
		return nil, fmt.Errorf("store %d notices: %w", n, err)
	}
	stored := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { stored[id] = true; return nil }); err != nil {
		return nil, fmt.Errorf("store %d notices: %w", n, err)
	}
	return stored, nil
}

//go:embed sql/stored_notices.sql
var storedNoticesSQL string

// StoredNotices says which of ids are stored.
func (s *Store) StoredNotices(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, err := s.DB.Query(ctx, storedNoticesSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("look up %d notices: %w", len(ids), err)
	}
	known := make(map[string]bool, len(ids))
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { known[id] = true; return nil }); err != nil {
		return nil, fmt.Errorf("look up %d notices: %w", len(ids), err)
	}
	return known, nil
}

// DeleteOldNotices deletes up to limit notices stored longer ago than
// keep, oldest first, and returns how many.
func (s *Store) DeleteOldNotices(ctx context.Context, keep time.Duration, limit int) (int64, error) {
	tag, err := s.DB.Exec(ctx, deleteOldNoticesSQL, keep.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete notices older than %v: %w", keep, err)
	}
	return tag.RowsAffected(), nil
}

var (
	//go:embed sql/lock_notice_sweep.sql
	lockNoticeSweepSQL string
	//go:embed sql/published_notices.sql
	publishedNoticesSQL string
	//go:embed sql/advance_notice_sweep.sql
	advanceNoticeSweepSQL string
)

// UnstoredNotices locks the sweep's cursor until tx ends and reads, after
// it, up to limit bid-notifications outbox rows published more than grace
// ago. It returns the payloads of those whose notice is not stored (Kafka
// lost them), the id the cursor may move to once they are, and how many
// rows it checked. It stops at the first row not yet published or
// published within grace. When another transaction holds the cursor (a
// notifier sweeping now), it checks nothing and returns ErrSweepBusy.
func UnstoredNotices(ctx context.Context, tx pgx.Tx, grace time.Duration, limit int) (payloads [][]byte, upto int64, checked int, err error) {
	switch err := tx.QueryRow(ctx, lockNoticeSweepSQL).Scan(&upto); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, 0, 0, ErrSweepBusy
	case err != nil:
		return nil, 0, 0, fmt.Errorf("lock the notice sweep: %w", err)
	}
	rows, err := tx.Query(ctx, publishedNoticesSQL, bidgate.TopicBidNotifications, upto, grace.Seconds(), limit)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read published notices after %d: %w", upto, err)
	}
	var (
		id      int64
		payload []byte
		stored  bool
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &payload, &stored}, func() error {
		if !stored {
			payloads = append(payloads, payload)
		}
		upto, checked = id, checked+1
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read published notices: %w", err)
	}
	return payloads, upto, checked, nil
}

// ErrSweepBusy is UnstoredNotices' answer while another notifier sweeps.
var ErrSweepBusy = errors.New("another notifier is sweeping")

// AdvanceNoticeSweep moves the sweep's cursor to upto (never back).
func AdvanceNoticeSweep(ctx context.Context, tx pgx.Tx, upto int64) error {
	if _, err := tx.Exec(ctx, advanceNoticeSweepSQL, upto); err != nil {
		return fmt.Errorf("advance the notice sweep to %d: %w", upto, err)
	}
	return nil
}
