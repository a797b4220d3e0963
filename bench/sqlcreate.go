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
// (g modulo spreadS) s. Both instants come from the database clock.
const bulkSQL = `
INSERT INTO auction (seller_id, title, start_price, current_price, min_increment,
                     mode, end_time, extend_window, extend_by)
SELECT 1 + g % $12::int, $1::text || ' #' || g::text, $2::numeric, $2::numeric, $3::numeric, 'COLD',
       CASE WHEN g % $4::int = 0
            THEN $5::timestamptz + ((g / $4::int) % $6::bigint) * INTERVAL '1 millisecond'
            ELSE $7::timestamptz + (g % $8::bigint) * INTERVAL '1 second' END,
       $9::bigint * INTERVAL '1 second', $10::bigint * INTERVAL '1 second'
  FROM generate_series(1, $11::int) AS g
RETURNING id, end_time`

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
}

// createSQL inserts the auctions straight into PostgreSQL.
func (e *Env) createSQL(ctx context.Context, b bulkAuctions) ([]AuctionSpec, error) {
	every := b.Every
	if every <= 0 {
		every = b.N + 1 // g % every is never 0
	}
	rows, err := e.db.Query(ctx, bulkSQL, b.Title, b.StartPrice, b.MinIncrement, every,
		b.Early, max(1, b.EarlySpread.Milliseconds()), b.Late, max(1, int64(b.LateSpread/time.Second)),
		int64(b.ExtendWindow/time.Second), int64(b.ExtendBy/time.Second), b.N, sellers)
	if err != nil {
		return nil, fmt.Errorf("create %d auctions in PostgreSQL: %w", b.N, err)
	}
	specs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuctionSpec, error) {
		s := AuctionSpec{StartPrice: b.StartPrice, MinIncrement: b.MinIncrement}
		return s, row.Scan(&s.ID, &s.OriginalEnd)
	})
	if err != nil {
		return nil, fmt.Errorf("create %d auctions in PostgreSQL: %w", b.N, err)
	}
	return specs, nil
}
