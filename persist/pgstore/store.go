// Package pgstore is bidgate's PostgreSQL store: the pool, the schema and
// its migrations, and every statement run on it, each in its own file under
// sql/ behind a typed call. Nobody else writes SQL: the shard's cold bid,
// the closer's settles and the persisters' writes all come through here.
package pgstore

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
)

var (
	//go:embed sql/create_auction.sql
	createAuctionSQL string
	//go:embed sql/get_auction.sql
	getAuctionSQL string
	//go:embed sql/accepted_bids.sql
	acceptedBidsSQL string
	//go:embed sql/set_hot.sql
	setHotSQL string
)

// Querier is a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Config says where PostgreSQL is and how many connections a pool keeps.
type Config struct {
	URL         string        // connection URL (or key=value connection string)
	MaxConns    int           // pool size, at most MaxConnsLimit
	PingTimeout time.Duration // how long Open waits for the first answer
}

// MaxConnsLimit bounds Config.MaxConns, well below what one PostgreSQL
// server serves: a pool is one of several clients.
const MaxConnsLimit = 1000

// DefaultConfig is the one statement of the PostgreSQL defaults: Open
// fills a zero field from it, and the command line's flags take theirs
// from it.
func DefaultConfig() Config {
	return Config{URL: "postgres://postgres@127.0.0.1:5432/bidgate?sslmode=disable", MaxConns: 32, PingTimeout: 5 * time.Second}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.URL = cmp.Or(c.URL, d.URL)
	c.MaxConns = cmp.Or(c.MaxConns, d.MaxConns)
	c.PingTimeout = cmp.Or(c.PingTimeout, d.PingTimeout)
	return c
}

// Validate reports a pool size Open cannot use. It checks c as it is:
// the command line's flags start from DefaultConfig, so a zero there was
// asked for.
func (c Config) Validate() error {
	if c.MaxConns < 1 || c.MaxConns > MaxConnsLimit {
		return fmt.Errorf("pgstore: MaxConns must be from 1 to %d, got %d", MaxConnsLimit, c.MaxConns)
	}
	return nil
}

// serial turns parallel query off for bidgate's sessions (unless the URL
// sets it): every statement is a short look-up or a page, where starting
// workers costs more than the whole statement (a list's search planned a
// parallel sort for a branch it then skipped: 30 ms instead of 3).
func serial(cfg *pgxpool.Config) {
	if _, set := cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"]; !set {
		cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"] = "0"
	}
}

// Open connects a pool to PostgreSQL and checks that it answers.
func Open(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	cfg.MaxConns = int32(c.MaxConns)
	serial(cfg)
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, c.PingTimeout)
	defer cancel()
	if err := db.Ping(pingCtx); err != nil {
		db.Close()
		return nil, fmt.Errorf("reach PostgreSQL at %s:%d (is it running? see README): %w",
			cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return db, nil
}

// Store runs auction queries on a pool, or inside a transaction.
type Store struct {
	DB Querier
}

// CreateAuction inserts a validated auction. It fails with
// bidgate.ErrEndTimeOutOfRange when the end is not in the database's future
// (or too far in it).
func (s *Store) CreateAuction(ctx context.Context, n bidgate.NewAuction) (bidgate.Auction, error) {
	mode := bidgate.ModeCold
	if n.Hot {
		mode = bidgate.ModeHot
	}
	row := s.DB.QueryRow(ctx, createAuctionSQL, n.SellerID, n.Title, n.StartPrice, n.MinIncrement,
		string(mode), n.EndTime, int64(n.ExtendWindow/time.Second), int64(n.ExtendBy/time.Second),
		int64(bidgate.MaxAuctionDuration/time.Second), nullTime(n.MaxEndTime), n.ReservePrice, n.BuyNowPrice)
	a, err := scanAuction(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return bidgate.Auction{}, bidgate.ErrEndTimeOutOfRange
	}
	if err != nil {
		return bidgate.Auction{}, fmt.Errorf("create auction: %w", err)
	}
	return a, nil
}

// Auction reads one auction as PostgreSQL has it.
func (s *Store) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	var alias int64
	a, err := scanAuction(rowWith(s.DB.QueryRow(ctx, getAuctionSQL, id), &alias))
	a.LeaderAlias = alias
	if errors.Is(err, pgx.ErrNoRows) {
		return bidgate.Auction{}, bidgate.ErrAuctionNotFound
	}
	if err != nil {
		return bidgate.Auction{}, fmt.Errorf("read auction %d: %w", id, err)
	}
	return a, nil
}

// LockAuction reads an auction and locks its row until the transaction ends;
// s.DB must be a transaction.
func (s *Store) LockAuction(ctx context.Context, id int64) (bidgate.Auction, error) {
	var alias int64
	a, err := scanAuction(rowWith(s.DB.QueryRow(ctx, getAuctionSQL+" FOR UPDATE OF a", id), &alias))
	a.LeaderAlias = alias
	if errors.Is(err, pgx.ErrNoRows) {
		return bidgate.Auction{}, bidgate.ErrAuctionNotFound
	}
	if err != nil {
		return bidgate.Auction{}, fmt.Errorf("lock auction %d: %w", id, err)
	}
	return a, nil
}

// SetHot flips an auction's mode to HOT.
func (s *Store) SetHot(ctx context.Context, id int64) error {
	if _, err := s.DB.Exec(ctx, setHotSQL, id); err != nil {
		return fmt.Errorf("mark auction %d hot: %w", id, err)
	}
	return nil
}

// AcceptedBids lists an auction's bids in acceptance order.
func (s *Store) AcceptedBids(ctx context.Context, auctionID int64) ([]bidgate.Bid, error) {
	rows, err := s.DB.Query(ctx, acceptedBidsSQL, auctionID)
	if err != nil {
		return nil, fmt.Errorf("bids of auction %d: %w", auctionID, err)
	}
	bids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (bidgate.Bid, error) {
		b := bidgate.Bid{AuctionID: auctionID}
		var kind string
		err := row.Scan(&b.BidderID, &b.Amount, &kind, &b.MaxAmount, &b.RequestID, &b.Seq, &b.AcceptedAt, &b.EndTime)
		b.Kind = bidgate.BidKind(kind)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("bids of auction %d: %w", auctionID, err)
	}
	return bids, nil
}

func scanAuction(row pgx.Row) (bidgate.Auction, error) {
	var (
		a                      bidgate.Auction
		leader                 *int64
		status, mode           string
		windowSecs, extendSecs int64
		maxEnd                 *time.Time
	)
	err := row.Scan(&a.ID, &a.SellerID, &a.Title, &a.StartPrice, &a.CurrentPrice, &a.MinIncrement,
		&leader, &status, &mode, &a.EndTime, &windowSecs, &extendSecs, &a.BidCount, &a.CreatedAt, &maxEnd, &a.ReservePrice,
		&a.LeaderMax, &a.BuyNowPrice)
	if err != nil {
		return bidgate.Auction{}, err
	}
	if maxEnd != nil {
		a.MaxEndTime = *maxEnd
	}
	if leader != nil {
		a.LeaderID = *leader
	}
	a.Status, a.Mode = bidgate.Status(status), bidgate.Mode(mode)
	a.ExtendWindow = time.Duration(windowSecs) * time.Second
	a.ExtendBy = time.Duration(extendSecs) * time.Second
	return a, nil
}

// IsUniqueViolation reports whether err is PostgreSQL's unique_violation,
// optionally on the named constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" &&
		(constraint == "" || pgErr.ConstraintName == constraint)
}

// IsUnavailable reports whether err means PostgreSQL could not be reached or
// did not answer in time (or the caller gave up waiting), rather than that it
// refused the query: the request may be retried.
func IsUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) {
		return true
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// 53: insufficient resources (too many connections); 57P: shutting down.
		return strings.HasPrefix(pgErr.Code, "53") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// nullTime is NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
