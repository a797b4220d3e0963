package shard

import (
	"context"

	"bidgate"
	"bidgate/persist/pgstore"
)

// ListAuctions reads one page of an auction list from the read replica
// when one serves, else from the primary; never from Redis logs. The page
// is the database's: its order and membership are as of the rows, which
// for a hot auction lag Redis by the persister's delay. The open hot
// auctions of the page then show Redis's live price, leader, bid count,
// end and status (one pipelined read), in the database's order still, so
// that the cursor stays a position in one consistent order.
func (s *Service) ListAuctions(ctx context.Context, q bidgate.ListQuery) (bidgate.ListPage, error) {
	var list []bidgate.Auction
	more := q
	more.Limit++ // one more row says whether a next page follows
	read := func(ctx context.Context, st *pgstore.Store) error {
		var err error
		list, err = st.ListAuctions(ctx, more)
		return err
	}
	var err error
	if s.reads != nil {
		err = s.reads.Do(ctx, read)
	} else {
		err = read(ctx, s.store)
	}
	if err != nil {
		return bidgate.ListPage{}, classify(err)
	}
	var page bidgate.ListPage
	if len(list) > q.Limit {
		list = list[:q.Limit]
		next := q.Sort.KeyOf(list[len(list)-1])
		page.Next = &next
	}
	s.overlayLive(ctx, list)
	page.Items = list
	return page, nil
}

// overlayLive shows the live state of the list's open hot auctions. It is
// a better answer, not a needed one: when Redis does not answer, the rows
// stay as the database has them.
func (s *Service) overlayLive(ctx context.Context, list []bidgate.Auction) {
	var ids []int64
	for _, a := range list {
		if a.Mode == bidgate.ModeHot && a.Status == bidgate.StatusOpen {
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	states, err := s.rs.States(ctx, ids...)
	if err != nil {
		s.metrics.listOverlayFailures.Inc()
		s.log.Debug("list: hot auctions shown as of the database", "err", err)
		return
	}
	for i, a := range list {
		if st, ok := states[a.ID]; ok && st.Seq >= a.BidCount {
			list[i] = st.Apply(a)
		}
	}
}
