package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"bidgate"
)

var (
	//go:embed sql/lock_auctions.sql
	lockAuctionsSQL string
	//go:embed sql/insert_bids.sql
	insertBidsSQL string
	//go:embed sql/insert_outbid_notices.sql
	insertOutbidNoticesSQL string
	//go:embed sql/advance_persisted.sql
	advancePersistedSQL string
	//go:embed sql/assign_aliases.sql
	assignAliasesSQL string
	//go:embed sql/hot_auctions.sql
	hotAuctionsSQL string
	//go:embed sql/hot_positions.sql
	hotPositionsSQL string
	//go:embed sql/persisted_positions.sql
	persistedPositionsSQL string
	//go:embed sql/compare_bids.sql
	compareBidsSQL string
)

// WriteHotBids writes hot bids to PostgreSQL inside tx: it locks their
// auctions, inserts the bids an open hot auction could have accepted (a bid
// already there is skipped, so any bid may come any number of times), tells
// the leader each new row replaced (an outbid notice in the outbox), raises
// each auction row to its highest new bid and advances its persisted
// position over the bids now present without a gap.
// Every writer of hot bids goes through here: the persister (from Kafka),
// the reconciler and the closer (from the Redis log).
//
// A bid never replaces another: one whose seq a row already holds is
// skipped, and of two bids of one seq in bids only the first is written.
//
// It returns the persisted position of every auction it knows and how many
// bids were new; bids of auctions PostgreSQL does not have are dropped.
func WriteHotBids(ctx context.Context, tx pgx.Tx, bids []bidgate.BidAccepted) (positions map[int64]int64, inserted int64, err error) {
	var cols bidColumns
	at := make(map[seqKey]int, len(bids)) // index in cols
	for _, b := range bids {
		k := seqKey{b.AuctionID, b.Seq}
		if _, seen := at[k]; seen {
			continue
		}
		at[k] = len(cols.auction)
		if err := cols.add(b); err != nil {
			return nil, 0, err
		}
	}
	auctions := slices.Compact(slices.Sorted(slices.Values(cols.auction)))
	rows, err := tx.Query(ctx, lockAuctionsSQL, auctions)
	if err != nil {
		return nil, 0, fmt.Errorf("lock auctions: %w", err)
	}
	positions = map[int64]int64{}
	var id, pos int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		positions[id] = pos
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("lock auctions: %w", err)
	}
	if len(cols.auction) > 0 {
		rows, err := tx.Query(ctx, insertBidsSQL, cols.auction, cols.bidder, cols.amount, cols.request,
			cols.seq, cols.accepted, cols.end, cols.kind, cols.max)
		if err != nil {
			return nil, 0, fmt.Errorf("insert bids: %w", err)
		}
		var notices outbidColumns
		var k seqKey
		if _, err := pgx.ForEachRow(rows, []any{&k.auction, &k.seq}, func() error {
			inserted++
			notices.add(&cols, at[k])
			return nil
		}); err != nil {
			return nil, 0, fmt.Errorf("insert bids: %w", err)
		}
		if len(notices.auction) > 0 {
			var woken int64
			if err := tx.QueryRow(ctx, insertOutbidNoticesSQL, notices.auction, notices.seq, notices.outbid,
				notices.outbidMax, notices.amount, notices.accepted).Scan(&woken); err != nil {
				return nil, 0, fmt.Errorf("write outbid notices: %w", err)
			}
		}
	}
	rows, err = tx.Query(ctx, advancePersistedSQL, auctions)
	if err != nil {
		return nil, 0, fmt.Errorf("advance persisted positions: %w", err)
	}
	var moved, from, to []int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		moved, from, to = append(moved, id), append(from, positions[id]), append(to, pos)
		positions[id] = pos
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("advance persisted positions: %w", err)
	}
	if len(moved) > 0 {
		if _, err := tx.Exec(ctx, assignAliasesSQL, moved, from, to); err != nil {
			return nil, 0, fmt.Errorf("assign bidder aliases: %w", err)
		}
	}
	return positions, inserted, nil
}

type seqKey struct{ auction, seq int64 }

// outbidColumns are the outbid notices of new rows that took the lead, for
// insert_outbid_notices.sql.
type outbidColumns struct {
	auction, seq, outbid []int64
	outbidMax, amount    []pgtype.Numeric
	accepted             []time.Time
}

// add takes the notice of cols' row i, if it replaced a leader.
func (n *outbidColumns) add(cols *bidColumns, i int) {
	if cols.outbid[i] == 0 {
		return
	}
	n.auction, n.seq, n.outbid = append(n.auction, cols.auction[i]), append(n.seq, cols.seq[i]), append(n.outbid, cols.outbid[i])
	n.outbidMax, n.amount = append(n.outbidMax, cols.outbidMax[i]), append(n.amount, cols.amount[i])
	n.accepted = append(n.accepted, cols.accepted[i])
}

// bidColumns holds a batch column by column, for unnest (amounts as
// numeric makes them).
type bidColumns struct {
	auction, bidder, seq []int64
	amount               []pgtype.Numeric
	request              []pgtype.UUID
	accepted, end        []time.Time
	kind                 []string
	max                  []pgtype.Numeric // not Valid: NULL
	outbid               []int64          // 0: the row replaced no leader
	outbidMax            []pgtype.Numeric // the replaced leader's maximum
}

func (c *bidColumns) add(b bidgate.BidAccepted) error {
	if err := b.Validate(); err != nil {
		return err
	}
	amount, err := bidgate.ParseMoney(b.Amount)
	if err != nil {
		return err
	}
	req, err := uuid.Parse(b.RequestID)
	if err != nil {
		return err
	}
	c.auction, c.bidder, c.seq = append(c.auction, b.AuctionID), append(c.bidder, b.BidderID), append(c.seq, b.Seq)
	c.amount, c.request = append(c.amount, numeric(amount)), append(c.request, uuidParam(req))
	c.accepted, c.end = append(c.accepted, b.AcceptedAt), append(c.end, b.EndTime)
	kind, max := b.Kind, pgtype.Numeric{}
	if kind == "" {
		kind = bidgate.KindStraight
	}
	if kind == bidgate.KindProxy {
		m, err := bidgate.ParseMoney(b.MaxAmount)
		if err != nil {
			return err
		}
		max = numeric(m)
	}
	c.kind, c.max = append(c.kind, string(kind)), append(c.max, max)
	outbidMax := pgtype.Numeric{}
	if b.Outbid != 0 {
		m, err := bidgate.ParseMoney(b.OutbidMax)
		if err != nil {
			return err
		}
		outbidMax = numeric(m)
	}
	c.outbid, c.outbidMax = append(c.outbid, b.Outbid), append(c.outbidMax, outbidMax)
	return nil
}

// RowMatch is how PostgreSQL's row of a bid's seq compares with the bid.
type RowMatch int

const (
	RowAbsent    RowMatch = iota // no row holds the seq
	RowSame                      // the row is the bid: same request, bidder, amount, kind and maximum
	RowDifferent                 // a row holds the seq and is another bid
)

// CompareBids tells, for each of bids, whether the bid table holds its
// auction's row of its seq and whether that row is the bid; the answers
// are in the order of bids.
func CompareBids(ctx context.Context, q Querier, bids []bidgate.BidAccepted) ([]RowMatch, error) {
	var cols bidColumns
	for _, b := range bids {
		if err := cols.add(b); err != nil {
			return nil, err
		}
	}
	out := make([]RowMatch, len(bids))
	if len(bids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, compareBidsSQL, cols.auction, cols.seq, cols.request, cols.bidder, cols.amount, cols.kind, cols.max)
	if err != nil {
		return nil, fmt.Errorf("compare bids with PostgreSQL's: %w", err)
	}
	var ord int64
	var same bool
	if _, err := pgx.ForEachRow(rows, []any{&ord, &same}, func() error {
		if ord < 1 || ord > int64(len(out)) {
			return fmt.Errorf("row %d of %d", ord, len(out))
		}
		out[ord-1] = map[bool]RowMatch{true: RowSame, false: RowDifferent}[same]
		return nil
	}); err != nil {
		return nil, fmt.Errorf("compare bids with PostgreSQL's: %w", err)
	}
	return out, nil
}

// HotAuctions lists the hot auctions whose logs are relayed: the open ones
// and those closed less than linger ago.
func (s *Store) HotAuctions(ctx context.Context, linger time.Duration) ([]int64, error) {
	rows, err := s.DB.Query(ctx, hotAuctionsSQL, int64(linger/time.Second))
	if err != nil {
		return nil, fmt.Errorf("list hot auctions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list hot auctions: %w", err)
	}
	return ids, nil
}

// Position is how far a hot auction's bids are in PostgreSQL without a gap.
type Position struct {
	AuctionID, Seq int64
}

// PersistedPositions reads the persisted positions of auctions, by id.
func (s *Store) PersistedPositions(ctx context.Context, auctions []int64) (map[int64]int64, error) {
	rows, err := s.DB.Query(ctx, persistedPositionsSQL, auctions)
	if err != nil {
		return nil, fmt.Errorf("read the persisted positions of %d auctions: %w", len(auctions), err)
	}
	pos := make(map[int64]int64, len(auctions))
	var id, seq int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
		pos[id] = seq
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read the persisted positions of %d auctions: %w", len(auctions), err)
	}
	return pos, nil
}

// HotPositions lists the persisted positions of the hot auctions whose bids
// may still be missing: the open ones and those closed less than linger ago.
func (s *Store) HotPositions(ctx context.Context, linger time.Duration) ([]Position, error) {
	rows, err := s.DB.Query(ctx, hotPositionsSQL, int64(linger/time.Second))
	if err != nil {
		return nil, fmt.Errorf("list hot auctions: %w", err)
	}
	pos, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Position])
	if err != nil {
		return nil, fmt.Errorf("list hot auctions: %w", err)
	}
	return pos, nil
}
