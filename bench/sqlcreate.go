package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// bulkSQL creates n cold auctions in one statement, with the columns
// persist/pgstore/sql/create_auction.sql writes, sold by sellers 1..$12 (as
// sellerID). Every `every`-th auction ends at
// early + (its rank among those modulo spreadMs) ms; the others at late +
// (g modulo spreadS) s. Both instants come from the database clock. The
// auctions g with g % $13 = 1 have the reserve $14, those with g % $15 = 0
// the buy-now price $16 ($13, $15: 0 for none).
const bulkSQL = `
INSERT INTO auction (seller_id, title, start_price, current_price, min_increment,
                     mode, end_time, extend_window, extend_by, reserve_price, buy_now_price)
SELECT 1 + g % $12::int, $1::text || ' #' || g::text, $2::numeric, $2::numeric, $3::numeric, 'COLD',
       CASE WHEN g % $4::int = 0
            THEN $5::timestamptz + ((g / $4::int) % $6::bigint) * INTERVAL '1 millisecond'
            ELSE $7::timestamptz + (g % $8::bigint) * INTERVAL '1 second' END,
       $9::bigint * INTERVAL '1 second', $10::bigint * INTERVAL '1 second',
       CASE WHEN $13::int > 0 AND g % $13::int = 1 % $13::int THEN $14::numeric END,
       CASE WHEN $15::int > 0 AND g % $15::int = 0 THEN $16::numeric END
  FROM generate_series(1, $11::int) AS g
RETURNING id, end_time, COALESCE(reserve_price::text, ''), COALESCE(buy_now_price::text, '')`

// bulkAuctions describes one bulk creation.
type bulkAuctions struct {
	N            int
	Title        string
	StartPrice   string
	MinIncrement string
	Every        int       // every Every-th auction ends early (1: all; 0: none)
	Early        time.Time // database time
	EarlySpread  time.Duration
	Late         time.Time // database time
	LateSpread   time.Duration
	ExtendWindow time.Duration
	ExtendBy     time.Duration
	// Every ReserveEvery-th auction has the reserve Reserve, every
	// BuyNowEvery-th the buy-now price BuyNow (0: none).
	ReserveEvery int
	Reserve      string
	BuyNowEvery  int
	BuyNow       string
}

// createSQL inserts the auctions straight into PostgreSQL.
func (e *Env) createSQL(ctx context.Context, b bulkAuctions) ([]AuctionSpec, error) {
	every := b.Every
	if every <= 0 {
		every = b.N + 1 // g % every is never 0
	}
	rows, err := e.db.Query(ctx, bulkSQL, b.Title, b.StartPrice, b.MinIncrement, every,
		b.Early, max(1, b.EarlySpread.Milliseconds()), b.Late, max(1, int64(b.LateSpread/time.Second)),
		int64(b.ExtendWindow/time.Second), int64(b.ExtendBy/time.Second), b.N, sellers,
		b.ReserveEvery, nullIfEmpty(b.Reserve), b.BuyNowEvery, nullIfEmpty(b.BuyNow))
	if err != nil {
		return nil, fmt.Errorf("create %d auctions in PostgreSQL: %w", b.N, err)
	}
	specs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuctionSpec, error) {
		s := AuctionSpec{StartPrice: b.StartPrice, MinIncrement: b.MinIncrement}
		return s, row.Scan(&s.ID, &s.OriginalEnd, &s.ReservePrice, &s.BuyNowPrice)
	})
	if err != nil {
		return nil, fmt.Errorf("create %d auctions in PostgreSQL: %w", b.N, err)
	}
	return specs, nil
}

// nullIfEmpty is an optional amount as a statement argument.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
