package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/auction_bids.sql
	auctionBidsSQL string
	//go:embed sql/my_bids.sql
	myBidsSQL string
)

// AuctionBids reads a page of auction id's history, newest first: up to
// limit rows with seq below before (0: from the newest). It fails with
// bidgate.ErrAuctionNotFound.
func (s *Store) AuctionBids(ctx context.Context, id, before int64, limit int) (bidgate.HistoryPage, error) {
	// One more than asked says whether more follow.
	rows, err := s.DB.Query(ctx, auctionBidsSQL, id, before, limit+1)
	if err != nil {
		return bidgate.HistoryPage{}, fmt.Errorf("read the bids of auction %d: %w", id, err)
	}
	defer rows.Close()
	var (
		page  bidgate.HistoryPage
		found bool
	)
	for rows.Next() {
		var (
			seq, bidder, alias *int64
			amount             decimal.NullDecimal
			kind               *string
			max                decimal.NullDecimal
			at                 *time.Time
		)
		if err := rows.Scan(&page.SellerID, &seq, &bidder, &alias, &amount, &kind, &max, &at); err != nil {
			return page, fmt.Errorf("read the bids of auction %d: %w", id, err)
		}
		found = true
		if seq == nil {
			continue // an auction without rows yet
		}
		if len(page.Entries) == limit {
			page.More = true
			continue
		}
		page.Entries = append(page.Entries, bidgate.HistoryEntry{Seq: *seq, BidderID: *bidder, Alias: *alias,
			Amount: amount.Decimal, Kind: bidgate.BidKind(*kind), MaxAmount: max, AcceptedAt: *at})
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("read the bids of auction %d: %w", id, err)
	}
	if !found {
		return page, bidgate.ErrAuctionNotFound
	}
	return page, nil
}

// MyBids reads a page of the auctions q.UserID bid on, as PostgreSQL has
// them: a hot open auction's leader, and so its state, may be behind
// Redis's (the shard overlays it). Next is set when the page is full.
func (s *Store) MyBids(ctx context.Context, q bidgate.MyBidsQuery) (bidgate.MyBidsPage, error) {
	rows, err := s.DB.Query(ctx, myBidsSQL, q.UserID, q.Before, q.Limit+1, string(q.State))
	if err != nil {
		return bidgate.MyBidsPage{}, fmt.Errorf("read the bids of user %d: %w", q.UserID, err)
	}
	defer rows.Close()
	var page bidgate.MyBidsPage
	for rows.Next() {
		var m bidgate.MyBid
		a, err := scanAuction(rowWith(rows, &m.Highest, &m.MaxAmount))
		if err != nil {
			return page, fmt.Errorf("read the bids of user %d: %w", q.UserID, err)
		}
		if len(page.Items) == q.Limit {
			page.Next = page.Items[len(page.Items)-1].Auction.ID
			break
		}
		m.Auction = a
		m.State = bidgate.StateOf(a, q.UserID)
		page.Items = append(page.Items, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("read the bids of user %d: %w", q.UserID, err)
	}
	return page, nil
}

// extraScan is a row whose Scan fills scanAuction's columns and then the
// extra destinations.
type extraScan struct {
	row   interface{ Scan(...any) error }
	extra []any
}

func rowWith(row interface{ Scan(...any) error }, extra ...any) extraScan {
	return extraScan{row: row, extra: extra}
}

func (e extraScan) Scan(dest ...any) error { return e.row.Scan(append(dest, e.extra...)...) }
