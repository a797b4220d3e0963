package pgstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bidgate"
)

var (
	//go:embed sql/close_notices.sql
	closeNoticesSQL string
	//go:embed sql/lock_close_notices.sql
	lockCloseNoticesSQL string
	//go:embed sql/write_close_notices.sql
	writeCloseNoticesSQL string
	//go:embed sql/left_close_notices.sql
	leftCloseNoticesSQL string
)

// CloseNotices reads the notices that the closes of auctions ids still owe
// (AddClosedEvents recorded them; WriteCloseNotices settles them); a close
// whose notices were written is absent.
func (s *Store) CloseNotices(ctx context.Context, ids []int64) ([]bidgate.Notice, error) {
	rows, err := s.DB.Query(ctx, closeNoticesSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("read the notices of %d closed auctions: %w", len(ids), err)
	}
	notices, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (bidgate.Notice, error) {
		var n bidgate.Notice
		err := row.Scan(&n.ID, &n.UserID, &n.Type, &n.AuctionID, &n.Title, &n.Price, &n.MaxAmount, &n.At)
		n.At = n.At.UTC()
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the notices of %d closed auctions: %w", len(ids), err)
	}
	return notices, nil
}

// WriteCloseNotices writes notices (CloseNotices') to the outbox of
// bid-notifications, keyed by user, for the closes whose debt no other
// transaction holds, and settles those closes; it returns the notices it
// wrote. Another closer writing the same closes at once writes them, not
// this one: each close's notices reach the outbox once.
func WriteCloseNotices(ctx context.Context, tx pgx.Tx, notices []bidgate.Notice) ([]bidgate.Notice, error) {
	if len(notices) == 0 {
		return nil, nil
	}
	var auctions []int64
	seen := map[int64]bool{}
	for _, n := range notices {
		if !seen[n.AuctionID] {
			seen[n.AuctionID] = true
			auctions = append(auctions, n.AuctionID)
		}
	}
	rows, err := tx.Query(ctx, lockCloseNoticesSQL, auctions)
	if err != nil {
		return nil, fmt.Errorf("lock the notices of %d closed auctions: %w", len(auctions), err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("lock the notices of %d closed auctions: %w", len(auctions), err)
	}
	if len(locked) == 0 {
		return nil, nil
	}
	mine := make(map[int64]bool, len(locked))
	for _, id := range locked {
		mine[id] = true
	}
	var (
		written  []bidgate.Notice
		users    []int64
		payloads []string
	)
	for _, n := range notices {
		if !mine[n.AuctionID] {
			continue
		}
		b, err := json.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("encode notice %s: %w", n.ID, err)
		}
		written, users, payloads = append(written, n), append(users, n.UserID), append(payloads, string(b))
	}
	if _, err := tx.Exec(ctx, writeCloseNoticesSQL, locked, users, payloads); err != nil {
		return nil, fmt.Errorf("write the notices of %d closed auctions to the outbox: %w", len(locked), err)
	}
	return written, nil
}

// LeftCloseNotices lists up to limit closes whose notices are still owed
// olderThan after they committed: their closer died before writing them.
func (s *Store) LeftCloseNotices(ctx context.Context, olderThan time.Duration, limit int) ([]int64, error) {
	rows, err := s.DB.Query(ctx, leftCloseNoticesSQL, olderThan.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("list closes that owe notices: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list closes that owe notices: %w", err)
	}
	return ids, nil
}
