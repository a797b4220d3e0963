package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"bidgate"
)

// StoredNoticesSQL lets the tests read the look-up's plan.
var StoredNoticesSQL = storedNoticesSQL

// ExplainHotWrite is the plan of WriteHotBids' insert of bids, line by line.
func ExplainHotWrite(ctx context.Context, db Querier, bids []bidgate.BidAccepted) ([]string, error) {
	var cols bidColumns
	for _, b := range bids {
		if err := cols.add(b); err != nil {
			return nil, err
		}
	}
	rows, err := db.Query(ctx, "EXPLAIN "+insertBidsSQL, cols.auction, cols.bidder, cols.amount, cols.request,
		cols.seq, cols.accepted, cols.end, cols.kind, cols.max, cols.outbid, cols.outbidMax)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
