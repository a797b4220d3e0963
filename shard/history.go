package shard

import (
	"context"
	"fmt"

	"bidgate"
	"bidgate/persist/pgstore"
)

// read runs read on the read replica when one serves, else on the primary.
func (s *Service) read(ctx context.Context, read func(context.Context, *pgstore.Store) error) error {
	if s.reads == nil {
		return classify(read(ctx, s.store))
	}
	return classify(s.reads.Do(ctx, read))
}

// AuctionBids reads a page of an auction's history from PostgreSQL (the
// read replica when one serves): a hot auction's rows as far as they have
// arrived there without a gap.
func (s *Service) AuctionBids(ctx context.Context, id, before int64, limit int) (bidgate.HistoryPage, error) {
	var page bidgate.HistoryPage
	err := s.read(ctx, func(ctx context.Context, st *pgstore.Store) error {
		var err error
		page, err = st.AuctionBids(ctx, id, before, limit)
		return err
	})
	return page, err
}

// MyBids reads a page of the auctions a user bid on from PostgreSQL, with
// each hot open auction's live state from Redis: its leader, and so the
// user's state there, is Redis's. An item that then is not in the state
// asked for is left out; the page's Next still moves past it.
func (s *Service) MyBids(ctx context.Context, q bidgate.MyBidsQuery) (bidgate.MyBidsPage, error) {
	var page bidgate.MyBidsPage
	err := s.read(ctx, func(ctx context.Context, st *pgstore.Store) error {
		var err error
		page, err = st.MyBids(ctx, q)
		return err
	})
	if err != nil {
		return page, err
	}
	kept := page.Items[:0]
	for _, m := range page.Items {
		if m.Auction.Mode == bidgate.ModeHot && m.Auction.Status == bidgate.StatusOpen {
			live, err := s.withLiveState(ctx, m.Auction)
			if err != nil {
				return page, fmt.Errorf("live state of auction %d: %w", m.Auction.ID, classify(err))
			}
			m.Auction, m.State = live, bidgate.StateOf(live, q.UserID)
		}
		if q.State == "" || m.State == q.State {
			kept = append(kept, m)
		}
	}
	page.Items = kept
	return page, nil
}
