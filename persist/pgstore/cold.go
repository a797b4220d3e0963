package pgstore

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed sql/cold_bid.sql
	coldBidSQL string
	//go:embed sql/look_up.sql
	lookUpSQL string
	//go:embed sql/limit_statement.sql
	limitStatementSQL string
	//go:embed sql/assign_alias.sql
	assignAliasSQL string
)

// Leader is who leads an auction: their id and alias (0, 0: nobody).
type Leader struct{ ID, Alias int64 }

// ColdView is what PostgreSQL holds of an auction and of an earlier bid
// with the same request id, read in one snapshot.
type ColdView struct {
	Status     bidgate.Status
	Mode       bidgate.Mode
	Running    bool // end time still ahead, by the database clock
	Price      decimal.Decimal
	Inc        decimal.Decimal
	Seller     int64
	Leader     int64              // 0: nobody
	LeaderMax  decimal.Decimal    // hidden
	BuyNowOpen bool               // a buy-now price and no bid yet
	Existing   *bidgate.BidResult // nil when the request id is new
}

// LookUpBid reads the auction a bid is for and the bid its request id made
// before, if any. It fails with bidgate.ErrAuctionNotFound.
func (s *Store) LookUpBid(ctx context.Context, r bidgate.BidRequest) (ColdView, error) {
	return scanColdView(s.DB.QueryRow(ctx, lookUpSQL, r.AuctionID, uuidParam(r.RequestID), uuidParam(bidgate.AutomaticRequestID(r.RequestID))), r)
}

// scanColdView reads look_up.sql's row for r.
func scanColdView(row pgx.Row, r bidgate.BidRequest) (ColdView, error) {
	var (
		v            ColdView
		status, mode string
		leader       *int64
		bidder, seq  *int64
		kind         *string
		amount, max  decimal.NullDecimal
		answeredAt   decimal.NullDecimal
		at, end      *time.Time
	)
	err := row.Scan(&status, &mode, &v.Running, &v.Price, &v.Inc, &v.Seller, &leader, &v.LeaderMax, &v.BuyNowOpen,
		&bidder, &amount, &kind, &max, &seq, &at, &end, &answeredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, bidgate.ErrAuctionNotFound
	}
	if err != nil {
		return v, fmt.Errorf("look up auction %d: %w", r.AuctionID, err)
	}
	v.Status, v.Mode = bidgate.Status(status), bidgate.Mode(mode)
	if leader != nil {
		v.Leader = *leader
	}
	if bidder != nil {
		b := bidgate.Bid{AuctionID: r.AuctionID, BidderID: *bidder, Amount: amount.Decimal, Kind: bidgate.BidKind(*kind),
			MaxAmount: max, RequestID: r.RequestID, Seq: *seq, AcceptedAt: *at, EndTime: *end}
		v.Existing = &bidgate.BidResult{Bid: b, Replayed: true, Leading: !answeredAt.Valid, CurrentPrice: b.Amount}
		if answeredAt.Valid {
			v.Existing.CurrentPrice = answeredAt.Decimal
		}
	}
	return v, nil
}

// ErrRequestRaced says a cold bid's statement failed on its request id: a
// request with the same key committed first, and a LookUpBid sees it.
var ErrRequestRaced = errors.New("a request with the same key was placed first")

// ColdOutcome is what the cold statement did with one bid. Placed is false
// when it wrote nothing (the bid is too low or lost a race to a higher bid,
// the end, a promotion, or the leader's bid changes nothing); View is the
// auction as it is right after the statement (look_up.sql, in the same
// round trip), which says why nothing was written, a replay included.
// Leader is who leads after a placed bid (the bidder, or the leader whose
// proxy answered), with their alias. Err is bidgate.ErrAuctionNotFound or
// nil.
type ColdOutcome struct {
	Result bidgate.BidResult
	Leader Leader
	Placed bool
	View   ColdView
	Err    error
}

// PlaceColdBid runs the cold path's conditional statement for one bid:
// check, decide and write in one step, by the database clock. It is
// PlaceColdBids for one bid, and it fails with ErrRequestRaced when the
// statement failed on the request id (a replay racing its original).
func (s *Store) PlaceColdBid(ctx context.Context, r bidgate.BidRequest, limit time.Duration) (ColdOutcome, error) {
	out, err := s.PlaceColdBids(ctx, []bidgate.BidRequest{r}, limit)
	if err != nil {
		return ColdOutcome{}, err
	}
	return out[0], out[0].Err
}

// PlaceColdBids runs the cold statement for bids on one auction, in order,
// in one round trip and one transaction: each bid's statement sees the ones
// before it, and one commit makes them all durable. Per bid, the statement,
// the alias and the look-up follow each other (ColdOutcome).
//
// limit bounds each statement inside PostgreSQL: how long it waits for the
// auction's row lock and runs. Past it the server cancels the statement,
// the transaction never commits, and the error is an undecided
// *bidgate.TimeoutError. On any other failure nothing is written either: a
// repeated request id is ErrRequestRaced, and the caller may place the
// bids one by one to learn which. s.DB must be a pool or a connection, not
// a transaction.
func (s *Store) PlaceColdBids(ctx context.Context, rs []bidgate.BidRequest, limit time.Duration) ([]ColdOutcome, error) {
	batch := &pgx.Batch{}
	batch.Queue(limitStatementSQL, strconv.FormatInt(max(limit.Milliseconds(), 1), 10))
	for _, r := range rs {
		req, auto := uuidParam(r.RequestID), uuidParam(bidgate.AutomaticRequestID(r.RequestID))
		batch.Queue(coldBidSQL, r.AuctionID, r.BidderID, numeric(r.Amount), req, string(r.Kind()), auto)
		batch.Queue(assignAliasSQL, r.AuctionID, r.BidderID)
		batch.Queue(lookUpSQL, r.AuctionID, req, auto)
	}
	results := s.DB.SendBatch(ctx, batch)
	_, err := results.Exec()
	out := make([]ColdOutcome, len(rs))
	for i := range rs {
		if err != nil {
			break
		}
		out[i], err = readColdBid(results, rs[i])
	}
	// Close reads to the end of the batch: its commit.
	err = cmp.Or(results.Close(), err)
	switch {
	case err == nil:
		return out, nil
	case IsUniqueViolation(err, "bid_auction_id_request_id_key"):
		return nil, ErrRequestRaced
	case cancelledByServer(err):
		return nil, &bidgate.TimeoutError{Undecided: true,
			Err: fmt.Errorf("cold bids on auction %d: PostgreSQL cancelled them after %v: %w", rs[0].AuctionID, limit, err)}
	}
	return nil, fmt.Errorf("cold bids on auction %d: %w", rs[0].AuctionID, err)
}

// readColdBid reads one bid's three results from PlaceColdBids' batch.
func readColdBid(results pgx.BatchResults, r bidgate.BidRequest) (o ColdOutcome, err error) {
	b := bidgate.Bid{AuctionID: r.AuctionID, BidderID: r.BidderID, Kind: r.Kind(), RequestID: r.RequestID}
	if r.Proxy {
		b.MaxAmount = decimal.NewNullDecimal(r.Amount)
	}
	err = results.QueryRow().Scan(&b.Seq, &b.AcceptedAt, &b.EndTime, &b.Amount, &o.Result.Leading, &o.Result.CurrentPrice, &o.Leader.ID)
	o.Placed = err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return o, err
	}
	// No row: the auction does not exist (the look-up says so).
	if err = results.QueryRow().Scan(&o.Leader.Alias); err != nil && !(errors.Is(err, pgx.ErrNoRows) && !o.Placed) {
		return o, err
	}
	o.View, err = scanColdView(results.QueryRow(), r)
	if errors.Is(err, bidgate.ErrAuctionNotFound) {
		o.Err, err = err, nil
	}
	o.Result.Bid = b
	if !o.Placed {
		o.Leader = Leader{}
	}
	return o, err
}

// cancelledByServer reports whether PostgreSQL cancelled a statement at a
// limit of its own (lock_not_available, query_canceled): the statement
// failed, and its transaction was rolled back.
func cancelledByServer(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "57014")
}

// ColdBidSQL is the cold path's statement, with parameters auction id,
// bidder id, value, request id, kind ("straight" or "proxy"), the derived
// request id of an automatic answer: the load-test harness measures
// PostgreSQL's own ceiling on it.
func ColdBidSQL() string { return coldBidSQL }
