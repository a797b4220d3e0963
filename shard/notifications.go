package shard

import (
	"context"

	"bidgate"
	"bidgate/persist/pgstore"
)

// Notifications reads a page of a user's stored notices and their unread
// count from PostgreSQL (the read replica when one serves: a mark just
// made on the primary may show there a moment later).
func (s *Service) Notifications(ctx context.Context, q bidgate.NotificationsQuery) (bidgate.NotificationsPage, error) {
	var page bidgate.NotificationsPage
	err := s.read(ctx, func(ctx context.Context, st *pgstore.Store) error {
		var err error
		page, err = st.Notifications(ctx, q)
		return err
	})
	return page, err
}

// MarkNotificationsRead marks a user's notices read up to one of theirs,
// on the primary, and returns how many are unread past it.
func (s *Service) MarkNotificationsRead(ctx context.Context, userID int64, upTo string) (int64, error) {
	unread, err := s.store.MarkNotificationsRead(ctx, userID, upTo)
	return unread, classify(err)
}
