package pgstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/notifications.sql
	notificationsSQL string
	//go:embed sql/mark_notifications_read.sql
	markNotificationsReadSQL string
)

// Notifications reads a page of q.UserID's stored notices, newest first,
// with their unread count (at most bidgate.MaxUnread). q.After or q.Before
// must be a notice of the user's own: any other id, another user's
// included, is bidgate.ErrNoticeNotFound, so nobody learns whether it
// exists. Next is set when more notices within the bounds follow the page.
func (s *Store) Notifications(ctx context.Context, q bidgate.NotificationsQuery) (bidgate.NotificationsPage, error) {
	var page bidgate.NotificationsPage
	if q.Limit < 1 || q.Limit > bidgate.MaxPageSize || (q.After != "" && q.Before != "") {
		return page, fmt.Errorf("read the notices of user %d: limit %d, after %q and before %q: out of bounds", q.UserID, q.Limit, q.After, q.Before)
	}
	anchor, newer := q.Before, false
	if q.After != "" {
		anchor, newer = q.After, true
	}
	// One more than asked says whether more follow.
	rows, err := s.DB.Query(ctx, notificationsSQL, q.UserID, anchor, newer, q.Limit+1, bidgate.MaxUnread)
	if err != nil {
		return page, fmt.Errorf("read the notices of user %d: %w", q.UserID, err)
	}
	defer rows.Close()
	anchored := false
	for rows.Next() {
		var (
			id, kind, title *string
			auction         *int64
			price, max      decimal.NullDecimal
			at              *time.Time
		)
		if err := rows.Scan(&page.Unread, &anchored, &id, &kind, &auction, &title, &price, &max, &at); err != nil {
			return page, fmt.Errorf("read the notices of user %d: %w", q.UserID, err)
		}
		if id == nil {
			continue // an empty page
		}
		if len(page.Items) == q.Limit {
			page.Next = page.Items[len(page.Items)-1].ID
			continue
		}
		n := bidgate.Notice{ID: *id, Type: bidgate.NoticeType(*kind), UserID: q.UserID, AuctionID: *auction,
			Title: *title, Price: bidgate.FormatMoney(price.Decimal), At: *at}
		if max.Valid {
			n.MaxAmount = bidgate.FormatMoney(max.Decimal)
		}
		page.Items = append(page.Items, n)
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("read the notices of user %d: %w", q.UserID, err)
	}
	if !anchored {
		return bidgate.NotificationsPage{}, fmt.Errorf("read the notices of user %d from %q: %w", q.UserID, anchor, bidgate.ErrNoticeNotFound)
	}
	return page, nil
}

// MarkNotificationsRead marks userID's notices read up to their notice
// upTo, which must be theirs (else bidgate.ErrNoticeNotFound, whether or
// not it is someone else's), and returns the unread count past the mark
// (at most bidgate.MaxUnread). The mark never moves back: an older id
// leaves it where it is. It writes: run it on the primary.
func (s *Store) MarkNotificationsRead(ctx context.Context, userID int64, upTo string) (int64, error) {
	var unread int64
	err := s.DB.QueryRow(ctx, markNotificationsReadSQL, userID, upTo, bidgate.MaxUnread).Scan(&unread)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("mark the notices of user %d read up to %q: %w", userID, upTo, bidgate.ErrNoticeNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("mark the notices of user %d read up to %q: %w", userID, upTo, err)
	}
	return unread, nil
}
