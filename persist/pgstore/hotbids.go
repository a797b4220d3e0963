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
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/lock_auctions.sql
	lockAuctionsSQL string
	//go:embed sql/insert_bids.sql
	insertBidsSQL string
	//go:embed sql/insert_outbid_notices.sql
	insertOutbidNoticesSQL string
	//go:embed sql/store_outbid_notices.sql
	storeOutbidNoticesSQL string
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

// OutbidNotices says where WriteHotBids puts the outbid notices of the rows
// it writes. Either way a notice is as durable as its row.
type OutbidNotices int

const (
	// StoreOutbidNotices stores them in notification, as the write's last
	// statement, under the notices' lock (lock_notices.sql, held until the
	// transaction ends, so that notices are numbered in commit order). The
	// caller commits next and locks nothing more: a writer holding the
	// notices' lock while it waits on an auction row another writer holds,
	// waiting on the notices' lock, would deadlock.
	StoreOutbidNotices OutbidNotices = iota
	// QueueOutbidNotices adds them to the outbox, for the notifier to store
	// from Kafka: for a transaction that goes on locking (the closer's),
	// or one rare enough not to matter (the reconciler's repairs).
	QueueOutbidNotices
)

// HotWrite is what WriteHotBids wrote.
type HotWrite struct {
	// Positions is the persisted position of every auction it knows.
	Positions map[int64]int64
	// Inserted is how many bids were new.
	Inserted int64
	// Notices are the outbid notices stored now (StoreOutbidNotices), for
	// the caller to push to their users once the transaction commits.
	Notices []bidgate.Notice
}

// WriteHotBids writes hot bids to PostgreSQL inside tx: it locks their
// auctions, inserts the bids an open hot auction could have accepted (a bid
// already there is skipped, so any bid may come any number of times),
// raises each auction row to its highest new bid, advances its persisted
// position over the bids now present without a gap, and tells the leader
// each new row replaced (an outbid notice, put where notices says).
// Every writer of hot bids goes through here: the persister (from Kafka),
// the reconciler and the closer (from the Redis log).
//
// A bid never replaces another: one whose seq a row already holds is
// skipped, and of two bids of one seq in bids only the first is written.
//
// Bids of auctions PostgreSQL does not have are dropped.
func WriteHotBids(ctx context.Context, tx pgx.Tx, bids []bidgate.BidAccepted, notices OutbidNotices) (HotWrite, error) {
	var w HotWrite
	var cols bidColumns
	at := make(map[seqKey]int, len(bids)) // index in cols
	for _, b := range bids {
		k := seqKey{b.AuctionID, b.Seq}
		if _, seen := at[k]; seen {
			continue
		}
		at[k] = len(cols.auction)
		if err := cols.add(b); err != nil {
			return w, err
		}
	}
	auctions := slices.Compact(slices.Sorted(slices.Values(cols.auction)))
	rows, err := tx.Query(ctx, lockAuctionsSQL, auctions)
	if err != nil {
		return w, fmt.Errorf("lock auctions: %w", err)
	}
	w.Positions = map[int64]int64{}
	var id, pos int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		w.Positions[id] = pos
		return nil
	}); err != nil {
		return w, fmt.Errorf("lock auctions: %w", err)
	}
	var outbid outbidColumns
	if len(cols.auction) > 0 {
		rows, err := tx.Query(ctx, insertBidsSQL, cols.auction, cols.bidder, cols.amount, cols.request,
			cols.seq, cols.accepted, cols.end, cols.kind, cols.max)
		if err != nil {
			return w, fmt.Errorf("insert bids: %w", err)
		}
		var k seqKey
		if _, err := pgx.ForEachRow(rows, []any{&k.auction, &k.seq}, func() error {
			w.Inserted++
			outbid.add(&cols, at[k])
			return nil
		}); err != nil {
			return w, fmt.Errorf("insert bids: %w", err)
		}
	}
	if len(outbid.auction) > 0 && notices == QueueOutbidNotices {
		var woken int64
		if err := tx.QueryRow(ctx, insertOutbidNoticesSQL, outbid.auction, outbid.seq, outbid.outbid,
			outbid.outbidMax, outbid.amount, outbid.accepted).Scan(&woken); err != nil {
			return w, fmt.Errorf("write outbid notices: %w", err)
		}
	}
	rows, err = tx.Query(ctx, advancePersistedSQL, auctions)
	if err != nil {
		return w, fmt.Errorf("advance persisted positions: %w", err)
	}
	var moved, from, to []int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		moved, from, to = append(moved, id), append(from, w.Positions[id]), append(to, pos)
		w.Positions[id] = pos
		return nil
	}); err != nil {
		return w, fmt.Errorf("advance persisted positions: %w", err)
	}
	if len(moved) > 0 {
		if _, err := tx.Exec(ctx, assignAliasesSQL, moved, from, to); err != nil {
			return w, fmt.Errorf("assign bidder aliases: %w", err)
		}
	}
	if len(outbid.auction) > 0 && notices == StoreOutbidNotices {
		if w.Notices, err = outbid.store(ctx, tx); err != nil {
			return w, err
		}
	}
	return w, nil
}

// store stores the notices in notification under the notices' lock, taken
// last so that it is held only until the commit, and returns those stored
// now.
func (n *outbidColumns) store(ctx context.Context, tx pgx.Tx) ([]bidgate.Notice, error) {
	if _, err := tx.Exec(ctx, lockNoticesSQL); err != nil {
		return nil, fmt.Errorf("lock the notices: %w", err)
	}
	rows, err := tx.Query(ctx, storeOutbidNoticesSQL, n.auction, n.seq, n.outbid, n.outbidMax, n.amount, n.accepted)
	if err != nil {
		return nil, fmt.Errorf("store %d outbid notices: %w", len(n.auction), err)
	}
	stored := make([]bidgate.Notice, 0, len(n.auction))
	var (
		x          bidgate.Notice
		price, max decimal.NullDecimal
	)
	if _, err := pgx.ForEachRow(rows, []any{&x.ID, &x.UserID, &x.AuctionID, &x.Title, &price, &max, &x.At}, func() error {
		x.Type, x.Price, x.MaxAmount, x.At = bidgate.NoticeOutbid, bidgate.FormatMoney(price.Decimal), "", x.At.UTC()
		if max.Valid {
			x.MaxAmount = bidgate.FormatMoney(max.Decimal)
		}
		stored = append(stored, x)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store %d outbid notices: %w", len(n.auction), err)
	}
	return stored, nil
}

type seqKey struct{ auction, seq int64 }

// outbidColumns are the outbid notices of new rows that took the lead, for
// insert_outbid_notices.sql or store_outbid_notices.sql.
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
