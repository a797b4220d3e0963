package persist_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	"bidgate/internal/testport"
	"bidgate/internal/testredis"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/redisstore"
	"bidgate/shard"
)

type pipeline struct {
	t      testing.TB
	db     *pgxpool.Pool
	rdb    redis.UniversalClient
	shard  *shard.Service
	broker *kafka.Embedded
	port   int // the broker's, to start it again on
	// wrote gets a signal after each batch a persister of the pipeline
	// committed: waits on the bid table re-check only then.
	wrote chan struct{}
}

func newPipeline(t testing.TB) *pipeline {
	t.Helper()
	db, _ := testdb.New(t, 16)
	rdb := testredis.Client(t)
	p := &pipeline{t: t, db: db, rdb: rdb, wrote: make(chan struct{}, 1),
		shard: shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1, StoreTimeout: testStoreTimeout, ColdLockTimeout: testColdLockTimeout}, prometheus.NewRegistry())}
	p.startBroker(testport.Free(t))
	return p
}

func (p *pipeline) startBroker(port int) {
	p.t.Helper()
	b, err := kafka.StartEmbedded(port, 4)
	if err != nil {
		p.t.Fatal(err)
	}
	p.broker, p.port = b, port
	p.t.Cleanup(b.Close)
}

// announce makes per signal p.wrote after each batch it commits.
func (p *pipeline) announce(per *persist.Persister) {
	persist.SetAfterInsert(per, func() error {
		select {
		case p.wrote <- struct{}{}:
		default: // a signal is pending: the waiter re-checks after this batch anyway
		}
		return nil
	})
}

// run starts fn in the background until the test ends.
func (p *pipeline) run(fn func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			p.t.Errorf("pipeline component: %v", err)
		}
	}()
	stop = func() { cancel(); <-done }
	p.t.Cleanup(stop)
	return stop
}

func (p *pipeline) relay(cfg persist.RelayConfig) *persist.Relay {
	return p.relayOn(cfg, prometheus.NewRegistry())
}

// relayOn is relay with its metrics on reg.
func (p *pipeline) relayOn(cfg persist.RelayConfig, reg prometheus.Registerer) *persist.Relay {
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidAccepted, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	return persist.NewRelay(p.db, p.rdb, w, cfg, reg)
}

// persister returns a persister in group that announces its batches.
func (p *pipeline) persister(group string) *persist.Persister {
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidAccepted, group, kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	per := persist.NewPersister(p.db, p.rdb, r, persist.PersisterConfig{}, prometheus.NewRegistry())
	p.announce(per)
	return per
}

// closeAtEnd closes a Kafka client when the test ends.
func (p *pipeline) closeAtEnd(what string, closeIt func() error) {
	p.t.Cleanup(func() {
		if err := closeIt(); err != nil {
			p.t.Errorf("close the Kafka %s: %v", what, err)
		}
	})
}

func (p *pipeline) hotAuction() bidgate.Auction {
	p.t.Helper()
	a, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_001, Title: "hot",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1),
		EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: true})
	if err != nil {
		p.t.Fatal(err)
	}
	return a
}

// bid sends n bids from 32 goroutines with rising amounts and returns the
// request ids that were accepted.
func (p *pipeline) bid(auction int64, n int, from int64) map[uuid.UUID]bool {
	var (
		mu       sync.Mutex
		accepted = map[uuid.UUID]bool{}
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				r := bidgate.BidRequest{AuctionID: auction, BidderID: int64(g + 1),
					Amount: decimal.NewFromInt(from + i), RequestID: uuid.New()}
				res, err := p.shard.PlaceBid(context.Background(), r)
				switch {
				case err == nil && !res.Replayed:
					mu.Lock()
					accepted[r.RequestID] = true
					mu.Unlock()
				case err != nil && !errors.Is(err, bidgate.ErrBidTooLow) && !errors.Is(err, bidgate.ErrAlreadyLeading):
					p.t.Errorf("bid: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return accepted
}

// waitFor checks cond, then again each time wake delivers (nil wake: every
// 10ms, for state nothing announces), until it holds; it returns the value
// cond saw then. After limit it fails naming what was awaited and the last
// value seen.
func waitFor[T any](tb testing.TB, limit time.Duration, what string, wake <-chan struct{}, cond func() (T, bool)) T {
	tb.Helper()
	return await.Until(tb, limit, what, wake, cond)
}

// bidRows counts the bid table's rows matching where.
func (p *pipeline) bidRows(where string, args ...any) int {
	p.t.Helper()
	var n int
	if err := p.db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE `+where, args...).Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// waitForBids waits, bounded, until the pipeline's persisters have written
// want rows for the auction, then returns their request ids.
func (p *pipeline) waitForBids(auction int64, want int) map[uuid.UUID]bool {
	p.t.Helper()
	waitFor(p.t, 60*time.Second, fmt.Sprintf("%d bids of auction %d in PostgreSQL", want, auction), p.wrote, func() (int, bool) {
		n := p.bidRows(`auction_id = $1`, auction)
		return n, n >= want
	})
	rows, err := p.db.Query(context.Background(), `SELECT request_id FROM bid WHERE auction_id = $1`, auction)
	if err != nil {
		p.t.Fatal(err)
	}
	ids := map[uuid.UUID]bool{}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			p.t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	return ids
}

// checkSame asserts that PostgreSQL holds exactly the accepted bids, and
// that the auction row carries the highest of them.
func (p *pipeline) checkSame(a bidgate.Auction, accepted map[uuid.UUID]bool) {
	p.t.Helper()
	got := p.waitForBids(a.ID, len(accepted))
	if len(got) != len(accepted) {
		p.t.Fatalf("bid table holds %d bids, %d were accepted", len(got), len(accepted))
	}
	for id := range accepted {
		if !got[id] {
			p.t.Fatalf("accepted bid %s is not in PostgreSQL", id)
		}
	}
	live, err := p.shard.Auction(context.Background(), a.ID)
	if err != nil {
		p.t.Fatal(err)
	}
	var price decimal.Decimal
	var count int64
	if err := p.db.QueryRow(context.Background(), `SELECT current_price, bid_count FROM auction WHERE id = $1`, a.ID).Scan(&price, &count); err != nil {
		p.t.Fatal(err)
	}
	if !price.Equal(live.CurrentPrice) || count != live.BidCount {
		p.t.Fatalf("PostgreSQL row at %s after %d bids, Redis at %s after %d", price, count, live.CurrentPrice, live.BidCount)
	}
}

func TestHotBidsReachPostgreSQL(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	p.run(p.relay(persist.RelayConfig{}).Run)
	p.run(p.persister("persister").Run)
	p.run(p.persister("persister").Run) // two share the partitions
	accepted := p.bid(a.ID, 3000, 100)
	p.checkSame(a, accepted)
	t.Logf("%d accepted bids all in PostgreSQL", len(accepted))
}

// The relay dies after producing and before moving its cursor; the next
// relay produces the same entries again and the persister absorbs them.
func TestRelayCrashBetweenProduceAndCursor(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	accepted := p.bid(a.ID, 500, 100)

	crashing := p.relay(persist.RelayConfig{})
	persist.SetAfterProduce(crashing, func(int64) error { return errors.New("crash") })
	if _, err := crashing.RelayOnce(context.Background()); err == nil {
		t.Fatal("the crashing relay did not stop at the hook")
	}
	p.run(p.persister("persister").Run)
	p.run(p.relay(persist.RelayConfig{}).Run)
	p.checkSame(a, accepted)
}

// The persister dies after its transaction and before committing offsets;
// a new one gets the same messages again and writes nothing twice.
func TestPersisterCrashBetweenInsertAndCommit(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	accepted := p.bid(a.ID, 500, 100)
	if _, err := p.relay(persist.RelayConfig{}).RelayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}

	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidAccepted, "persister", kafka.Security{})
	crashing := persist.NewPersister(p.db, p.rdb, r, persist.PersisterConfig{}, prometheus.NewRegistry())
	crashed := errors.New("crash")
	persist.SetAfterInsert(crashing, func() error { return crashed })
	if err := crashing.Run(context.Background()); !errors.Is(err, crashed) {
		t.Fatalf("persister run: %v", err)
	}
	// The crashed process's connections die with it: its group membership
	// and partitions go to the next persister.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE auction_id = $1`, a.ID).Scan(&n); err != nil || n == 0 {
		t.Fatalf("the crashing persister wrote %d bids (err %v)", n, err)
	}
	p.run(p.persister("persister").Run)
	p.checkSame(a, accepted)
}

// Kafka goes away (the embedded broker stops, forgetting everything) while
// bids keep coming; once it is back on the same port, everything arrives.
func TestKafkaUnavailable(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	p.run(p.relay(persist.RelayConfig{Refeed: time.Second}).Run)
	stopPersister := p.run(p.persister("persister").Run)
	accepted := p.bid(a.ID, 300, 100)
	p.waitForBids(a.ID, len(accepted))

	stopPersister()
	p.broker.Close()
	more := p.bid(a.ID, 300, 1000) // accepted while Kafka is down
	if len(more) == 0 {
		t.Fatal("no bid accepted while Kafka was down")
	}
	for id := range more {
		accepted[id] = true
	}
	p.startBroker(p.port)
	stopPersister = p.run(p.persister("persister-2").Run)
	p.checkSame(a, accepted)

	// Worse: the broker forgets bids the relay had already produced and the
	// persister had not read. The relay sees the persisted position lag and
	// produces them again.
	stopPersister()
	lost := p.bid(a.ID, 300, 2000)
	for id := range lost {
		accepted[id] = true
	}
	p.waitRelayed(a.ID)
	p.broker.Close()
	p.startBroker(p.port)
	p.run(p.persister("persister-3").Run)
	p.checkSame(a, accepted)
}

// waitForTotal waits, bounded, until the pipeline's persisters have written
// n rows in all.
func (p *pipeline) waitForTotal(n int) {
	p.t.Helper()
	waitFor(p.t, 120*time.Second, fmt.Sprintf("%d bids in PostgreSQL", n), p.wrote, func() (int, bool) {
		got := p.bidRows(`true`)
		return got, got >= n
	})
}

// waitRelayed waits, bounded, until the relay's cursor reaches the newest
// entry of the auction's log. Nothing announces the cursor's moves (a SET
// after the produce), so this polls.
func (p *pipeline) waitRelayed(auction int64) {
	p.t.Helper()
	k := redisstore.KeysOf(auction)
	last, err := p.rdb.XRevRangeN(context.Background(), k.Log, "+", "-", 1).Result()
	if err != nil || len(last) == 0 {
		p.t.Fatalf("log of auction %d: %v", auction, err)
	}
	waitFor(p.t, 30*time.Second, fmt.Sprintf("the relay cursor of auction %d at %s", auction, last[0].ID), nil, func() (string, bool) {
		cur, err := p.rdb.Get(context.Background(), k.Relayed).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			p.t.Fatalf("relay cursor of auction %d: %v", auction, err)
		}
		return cur, cur == last[0].ID
	})
}

// testStoreTimeout is the bid budget of these tests' shards: they check
// what is decided, not how fast, and a loaded test machine can take longer
// than the production default (shard TestColdBidGivesUpOnALockedRow and
// cmd/bidgate's stall tests check that budget).
const testStoreTimeout = time.Minute

// testColdLockTimeout is these shards' wait for a cold auction's row lock,
// for the same reason: bids racing for one row queue for it.
const testColdLockTimeout = 30 * time.Second
