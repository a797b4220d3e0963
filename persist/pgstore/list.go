package pgstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bidgate"
)

var (
	//go:embed sql/list_ending.sql
	listEndingSQL string
	//go:embed sql/list_newest.sql
	listNewestSQL string
	//go:embed sql/list_price.sql
	listPriceSQL string
)

// searchWalk is how many index entries per item of a page a search may
// test in the list's order before it asks the title index for the rest.
// The walk stops at the page's last match, so a common word costs what it
// finds; a rare one (under one title in 200 along the order) costs the
// whole walk, then its few matches are fetched and sorted. 100 was too few:
// a thousand auctions of a flash sale ending first pushed a common word
// past the walk, into a sort of every match.
const searchWalk = 200

// ListAuctions reads one page of an auction list, as the database has it.
// The statement runs unprepared: its optional filters are folded away only
// in a plan made for the values given, and a cached generic plan would
// scan for all of them.
func (s *Store) ListAuctions(ctx context.Context, q bidgate.ListQuery) ([]bidgate.Auction, error) {
	f := q.Filter
	args := []any{pgx.QueryExecModeExec, nullString(string(f.Status)), nullInt(f.SellerID), nullString(f.Query),
		nullTime(f.EndingAfter), nullTime(f.EndingBefore), f.Hot, nil, nullInt(q.After.ID), q.Limit, q.Limit}
	if f.Query != "" {
		args[10] = q.Limit * searchWalk
	}
	stmt := listEndingSQL
	switch q.Sort {
	case bidgate.SortNewest:
		stmt = listNewestSQL
	case bidgate.SortPriceDesc:
		stmt = listPriceSQL
	}
	if q.After.ID != 0 {
		if q.Sort == bidgate.SortPriceDesc {
			args[7] = q.After.Price
		} else {
			args[7] = q.After.Time
		}
	}
	rows, err := s.DB.Query(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("list auctions (sort %s): %w", q.Sort, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (bidgate.Auction, error) {
		var alias int64
		a, err := scanAuction(rowWith(row, &alias))
		a.LeaderAlias = alias
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list auctions (sort %s): %w", q.Sort, err)
	}
	return list, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullInt(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
