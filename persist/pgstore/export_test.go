package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
)

// StoredNoticesSQL lets the tests read the look-up's plan.
var StoredNoticesSQL = storedNoticesSQL

// DueWorkSQL lets the tests read the close pass's look's plan.
var DueWorkSQL = dueWorkSQL

// ExplainOutbidNotices is the plan of WriteHotBids' outbid notices for
// bids, all new, line by line.
func ExplainOutbidNotices(ctx context.Context, db Querier, bids []bidgate.BidAccepted) ([]string, error) {
	var cols bidColumns
	var notices outbidColumns
	for i, b := range bids {
		if err := cols.add(b); err != nil {
			return nil, err
		}
		notices.add(&cols, i)
	}
	rows, err := db.Query(ctx, "EXPLAIN "+insertOutbidNoticesSQL, notices.auction, notices.seq, notices.outbid,
		notices.outbidMax, notices.amount, notices.accepted)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// PendingOutboxSQL lets the tests read the pending rows' plan.
var PendingOutboxSQL = pendingOutboxSQL

// PruneOutboxSQL lets the tests read the pruning's plan.
var PruneOutboxSQL = pruneOutboxSQL

// AssignAliasesSQL lets the tests read the hot aliases' plan.
var AssignAliasesSQL = assignAliasesSQL

// CompareBidsSQL lets the tests read the comparison's plan.
var CompareBidsSQL = compareBidsSQL

// OutboxBacklogSQL and PublishedNoticesSQL let the tests read what the
// relay's and the sweep's reads cost.
var (
	OutboxBacklogSQL    = outboxBacklogSQL
	PublishedNoticesSQL = publishedNoticesSQL
)

// MigrateTo applies the migrations up to version last: the schema a
// previous version left.
func MigrateTo(ctx context.Context, db *pgxpool.Pool, last int) error {
	_, err := migrateTo(ctx, db, last)
	return err
}
