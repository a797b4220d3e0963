package persist

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/lock_auctions.sql
	lockAuctionsSQL string
	//go:embed sql/insert_bids.sql
	insertBidsSQL string
	//go:embed sql/advance_persisted.sql
	advancePersistedSQL string
)

// WriteHotBids writes hot bids to PostgreSQL inside tx: it locks their
// auctions, inserts the bids an open hot auction could have accepted (a bid
// already there is skipped, so any bid may come any number of times), raises
// each auction row to its highest new bid and advances its persisted
// position over the bids now present without a gap.
// Every writer of hot bids goes through here: the persister (from Kafka),
// the reconciler and the closer (from the Redis log).
//
// It returns the persisted position of every auction it knows and how many
// bids were new; bids of auctions PostgreSQL does not have are dropped.
func WriteHotBids(ctx context.Context, tx pgx.Tx, bids []bidgate.BidAccepted) (positions map[int64]int64, inserted int64, err error) {
	var cols bidColumns
	for _, b := range bids {
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
		var raised int64
		err := tx.QueryRow(ctx, insertBidsSQL, cols.auction, cols.bidder, cols.amount, cols.request,
			cols.seq, cols.accepted, cols.end).Scan(&inserted, &raised)
		if err != nil {
			return nil, 0, fmt.Errorf("insert bids: %w", err)
		}
	}
	rows, err = tx.Query(ctx, advancePersistedSQL, auctions)
	if err != nil {
		return nil, 0, fmt.Errorf("advance persisted positions: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		positions[id] = pos
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("advance persisted positions: %w", err)
	}
	return positions, inserted, nil
}

// bidColumns holds a batch column by column, for unnest.
type bidColumns struct {
	auction, bidder, seq []int64
	amount               []decimal.Decimal
	request              []uuid.UUID
	accepted, end        []time.Time
}

func (c *bidColumns) add(b bidgate.BidAccepted) error {
	amount, err := bidgate.ParseMoney(b.Amount)
	if err != nil {
		return fmt.Errorf("bid %d/%d: amount: %w", b.AuctionID, b.Seq, err)
	}
	req, err := uuid.Parse(b.RequestID)
	if err != nil {
		return fmt.Errorf("bid %d/%d: request id: %w", b.AuctionID, b.Seq, err)
	}
	if b.AuctionID <= 0 || b.BidderID <= 0 || b.Seq <= 0 {
		return fmt.Errorf("bid %d/%d: auction, bidder and seq must be positive", b.AuctionID, b.Seq)
	}
	c.auction, c.bidder, c.seq = append(c.auction, b.AuctionID), append(c.bidder, b.BidderID), append(c.seq, b.Seq)
	c.amount, c.request = append(c.amount, amount), append(c.request, req)
	c.accepted, c.end = append(c.accepted, b.AcceptedAt), append(c.end, b.EndTime)
	return nil
}

// LogBid reads one entry of a hot auction's Redis log (written by
// shard/lua/bid_batch.lua: seq, bidder, amount in cents, req, at_us,
// end_us) as the bid it records.
func LogBid(auctionID int64, e redis.XMessage) (bidgate.BidAccepted, error) {
	num := func(f string) (int64, error) {
		s, _ := e.Values[f].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("auction %d log entry %s: field %s = %q", auctionID, e.ID, f, s)
		}
		return n, nil
	}
	b := bidgate.BidAccepted{AuctionID: auctionID, StreamID: e.ID}
	var cents, atUs, endUs int64
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"seq", &b.Seq}, {"bidder", &b.BidderID}, {"amount", &cents}, {"at_us", &atUs}, {"end_us", &endUs}} {
		if *f.dst, err = num(f.name); err != nil {
			return b, err
		}
	}
	b.RequestID, _ = e.Values["req"].(string)
	b.Amount = bidgate.FormatMoney(bidgate.FromCents(cents))
	b.AcceptedAt, b.EndTime = time.UnixMicro(atUs).UTC(), time.UnixMicro(endUs).UTC()
	return b, nil
}

// LogBidsAfter reads the bids of an auction's Redis log whose seq is past
// after, in order. The log is trimmed only up to the persisted position, so
// reading from its start costs little.
func LogBidsAfter(ctx context.Context, rdb redis.UniversalClient, auctionID, after int64) ([]bidgate.BidAccepted, error) {
	const step = 1000
	var bids []bidgate.BidAccepted
	from := "-"
	for {
		entries, err := rdb.XRangeN(ctx, KeysOf(auctionID).Log, from, "+", step).Result()
		if err != nil {
			return nil, fmt.Errorf("read the bid log of auction %d: %w", auctionID, err)
		}
		for _, e := range entries {
			b, err := LogBid(auctionID, e)
			if err != nil {
				return nil, err
			}
			if b.Seq > after {
				bids = append(bids, b)
			}
		}
		if len(entries) < step {
			return bids, nil
		}
		from = "(" + entries[len(entries)-1].ID
	}
}
