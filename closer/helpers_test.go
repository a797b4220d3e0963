package closer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
	"bidgate/shard"
)

var ctx = context.Background()

// env is one test's stores, a shard to create auctions and bid through, and
// a closer with its own metrics.
type env struct {
	db     *pgxpool.Pool
	dbURL  string // db's, for another process
	rdb    redis.UniversalClient
	shards *shard.Service
	closer *Closer
}

func newEnv(t testing.TB, conns int32, cfg Config) *env {
	t.Helper()
	db, dbURL := testdb.New(t, conns)
	rdb := testredis.Client(t)
	return &env{
		db: db, dbURL: dbURL, rdb: rdb,
		shards: shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1, StoreTimeout: testStoreTimeout, ColdLockTimeout: testColdLockTimeout}, prometheus.NewRegistry()),
		closer: New(db, rdb, cfg, prometheus.NewRegistry()),
	}
}

// newAuction creates an auction through the shard, ending in an hour (tests
// then move the end with the stores' own clocks), without anti-sniping
// unless window is set.
func (e *env) newAuction(t testing.TB, hot bool, start string, window time.Duration) bidgate.Auction {
	t.Helper()
	return e.create(t, bidgate.NewAuction{
		SellerID: 9_000_007, Title: "closer test lot", StartPrice: decimal.RequireFromString(start),
		MinIncrement: decimal.RequireFromString("1"), EndTime: time.Now().Add(time.Hour),
		ExtendWindow: window, ExtendBy: time.Second, Hot: hot,
	})
}

// create creates n through the shard; a hot one's Redis keys go when the
// test ends.
func (e *env) create(t testing.TB, n bidgate.NewAuction) bidgate.Auction {
	t.Helper()
	a, err := e.shards.CreateAuction(ctx, n)
	if err != nil {
		t.Fatalf("create auction: %v", err)
	}
	if n.Hot {
		t.Cleanup(func() {
			if err := redisstore.New(e.rdb).Delete(context.Background(), a.ID); err != nil {
				t.Errorf("delete the keys of auction %d: %v", a.ID, err)
			}
		})
	}
	return a
}

func (e *env) bid(t testing.TB, auction, bidder int64, amount string) bidgate.Bid {
	t.Helper()
	res, err := e.shards.PlaceBid(ctx, bidRequest(auction, bidder, amount))
	if err != nil {
		t.Fatalf("bid %s by %d on auction %d: %v", amount, bidder, auction, err)
	}
	return res.Bid
}

func bidRequest(auction, bidder int64, amount string) bidgate.BidRequest {
	return bidgate.BidRequest{AuctionID: auction, BidderID: bidder,
		Amount: decimal.RequireFromString(amount), RequestID: uuid.New()}
}

// endInPostgres moves an auction's PostgreSQL end into the database's past.
func (e *env) endInPostgres(t testing.TB, id int64) {
	t.Helper()
	if _, err := e.db.Exec(ctx, `UPDATE auction SET end_time = clock_timestamp() - INTERVAL '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// setRedisEnd sets a hot auction's Redis end to Redis's clock plus offset.
func (e *env) setRedisEnd(t testing.TB, id int64, offset time.Duration) int64 {
	t.Helper()
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	end := now.Add(offset).UnixMicro()
	if err := e.rdb.HSet(ctx, redisstore.KeysOf(id).State, "end_us", end).Err(); err != nil {
		t.Fatal(err)
	}
	return end
}

// row is an auction's row as the closer leaves it.
type row struct {
	status   bidgate.Status
	price    decimal.Decimal
	leader   *int64
	bidCount int64
	endTime  time.Time
	closedAt *time.Time
}

func readRow(t testing.TB, db *pgxpool.Pool, id int64) row {
	t.Helper()
	var r row
	var status string
	err := db.QueryRow(ctx, `SELECT status, current_price, leader_id, bid_count, end_time, closed_at FROM auction WHERE id = $1`, id).
		Scan(&status, &r.price, &r.leader, &r.bidCount, &r.endTime, &r.closedAt)
	if err != nil {
		t.Fatalf("read auction %d: %v", id, err)
	}
	r.status = bidgate.Status(status)
	return r
}

// outboxRow is one outbox row with its decoded event.
type outboxRow struct {
	id        int64
	aggregate int64
	topic     string
	payload   []byte
	event     bidgate.AuctionClosed
	published bool
}

func readOutbox(t testing.TB, db *pgxpool.Pool, where string, args ...any) []outboxRow {
	t.Helper()
	// Auction events only: closes also add notices (noticesOf).
	rows, err := db.Query(ctx, `SELECT id, aggregate_id, topic, payload, published_at IS NOT NULL FROM outbox
WHERE topic <> 'bid-notifications' AND (`+where+`) ORDER BY id`, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var o outboxRow
		if err := rows.Scan(&o.id, &o.aggregate, &o.topic, &o.payload, &o.published); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(o.payload, &o.event); err != nil {
			t.Fatalf("outbox row %d: %v", o.id, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkClosed asserts that auction id is closed with the given winner,
// price and bid count, and has exactly one auction-closed event saying so.
func checkClosed(t testing.TB, db *pgxpool.Pool, id int64, leader *int64, price string, bidCount int64) row {
	t.Helper()
	r := readRow(t, db, id)
	if r.status != bidgate.StatusClosed || r.closedAt == nil {
		t.Fatalf("auction %d: status %s, closed_at %v", id, r.status, r.closedAt)
	}
	if !equalLeader(r.leader, leader) || bidgate.FormatMoney(r.price) != price || r.bidCount != bidCount {
		t.Fatalf("auction %d closed with leader %v price %s bids %d, want %v %s %d",
			id, fmtLeader(r.leader), r.price, r.bidCount, fmtLeader(leader), price, bidCount)
	}
	events := readOutbox(t, db, `aggregate_id = $1`, id)
	if len(events) != 1 {
		t.Fatalf("auction %d has %d outbox rows, want 1", id, len(events))
	}
	checkEvent(t, events[0], id, r)
	return r
}

// checkEvent asserts that an outbox row announces what the row says.
func checkEvent(t testing.TB, o outboxRow, id int64, r row) {
	t.Helper()
	ev := o.event
	if o.topic != "auction-closed" || o.aggregate != id || ev.AuctionID != id || !equalLeader(ev.WinnerID, r.leader) ||
		ev.FinalPrice != bidgate.FormatMoney(r.price) || ev.BidCount != r.bidCount || r.closedAt == nil || !ev.ClosedAt.Equal(*r.closedAt) {
		t.Fatalf("auction %d: event %s does not match the row %+v", id, o.payload, r)
	}
}

func equalLeader(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func fmtLeader(l *int64) any {
	if l == nil {
		return "none"
	}
	return *l
}

func ptr(n int64) *int64 { return &n }

// eventually re-checks cond every few milliseconds until it holds and
// returns the value it saw then; after limit it fails the test naming what
// was awaited and the last value seen. Only for state nothing announces
// (rows or metrics a background goroutine writes).
func eventually[T any](t testing.TB, limit time.Duration, what string, cond func() (T, bool)) T {
	t.Helper()
	return await.Until(t, limit, what, nil, cond)
}

func count(t testing.TB, db *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// quiet is a logger for tests that fail on purpose.
var quiet = slog.New(slog.DiscardHandler)

// testStoreTimeout is the bid budget of these tests' shards: they check
// what is decided, not how fast, and a loaded test machine can take longer
// than the production default (shard TestColdBidGivesUpOnALockedRow and
// cmd/bidgate's stall tests check that budget).
const testStoreTimeout = time.Minute

// testColdLockTimeout is these shards' wait for a cold auction's row lock,
// for the same reason: bids racing for one row queue for it.
const testColdLockTimeout = 30 * time.Second

// leaderOf is the leader an update names internally (viewers get the
// alias only).
func leaderOf(u bidgate.StateUpdate) *int64 {
	if u.LeaderID == 0 {
		return nil
	}
	return &u.LeaderID
}

// noticesOf is the notices auction id's close put in the outbox (not its
// bids' outbid notices), as
// "type:user", sorted; each must be a valid bidgate.Notice keyed by its
// user, at the final price, naming only its user's own maximum, and be
// stored for its user already (the closer stores them right after the close), the
// same.
func noticesOf(t testing.TB, db *pgxpool.Pool, id int64) []string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT aggregate_id, payload FROM outbox WHERE topic = 'bid-notifications' AND payload->>'type' <> 'outbid' AND (payload->>'auctionId')::bigint = $1`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			key     int64
			payload []byte
			n       bidgate.Notice
		)
		if err := rows.Scan(&key, &payload); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(payload, &n); err != nil {
			t.Fatalf("notice %s: %v", payload, err)
		}
		price, err := bidgate.ParseMoney(n.Price)
		if err != nil || bidgate.FormatMoney(price) != n.Price {
			t.Fatalf("notice %s: price not in money's format", payload)
		}
		if err := n.Validate(); err != nil || n.UserID != key || n.ID != bidgate.NoticeID(n.Type, id, n.UserID, 0) {
			t.Fatalf("notice %s (key %d): %v", payload, key, err)
		}
		var stored bidgate.Notice
		var max *string
		err = db.QueryRow(ctx, `SELECT user_id, type, auction_id, title, price::text, max_amount::text, at FROM notification WHERE id = $1`, n.ID).
			Scan(&stored.UserID, &stored.Type, &stored.AuctionID, &stored.Title, &stored.Price, &max, &stored.At)
		if err != nil {
			t.Fatalf("notice %s is not stored: %v", n.ID, err)
		}
		if max != nil {
			stored.MaxAmount = *max
		}
		stored.ID = n.ID
		if !stored.At.Equal(n.At) || stored.UserID != n.UserID || stored.Type != n.Type || stored.Price != n.Price ||
			stored.MaxAmount != n.MaxAmount || stored.Title != n.Title || stored.AuctionID != n.AuctionID {
			t.Fatalf("notice %s stored as %+v, in the outbox %+v", n.ID, stored, n)
		}
		out = append(out, fmt.Sprintf("%s:%d", n.Type, n.UserID))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
