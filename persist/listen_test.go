package persist

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
	"bidgate/shard"
)

// One wake-up for many notifications: after the first, gather takes every
// notification that came meanwhile, so the next wait waits.
func TestListenerGathersNotifications(t *testing.T) {
	db, _ := testdb.New(t, 4)
	ctx := context.Background()
	l := &listener{db: db, topic: bidgate.TopicAuctionClosed, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer l.close()
	l.listen(ctx)
	if l.conn == nil {
		t.Fatal("not listening")
	}
	for range 5 {
		if _, err := db.Exec(ctx, "SELECT pg_notify($1, '')", pgstore.OutboxChannel(bidgate.TopicAuctionClosed)); err != nil {
			t.Fatal(err)
		}
	}
	if !l.wait(ctx, 10*time.Second) {
		t.Fatal("no notification")
	}
	l.gather(ctx, 500*time.Millisecond) // the other four arrive meanwhile
	if l.wait(ctx, 100*time.Millisecond) {
		t.Fatal("a notification left after gather: each would cost a pass")
	}
	if l.conn == nil {
		t.Fatal("gather dropped the connection")
	}
}

// Each commit that adds outbox rows wakes the relays of its rows' topic
// and no other: an outbid notice, cold or hot, does not cost the
// auction-closed and -cancelled relays a pass.
func TestOutboxNotifiesOnlyItsTopic(t *testing.T) {
	db, _ := testdb.New(t, 8)
	rdb := testredis.Client(t)
	ctx := context.Background()
	sh := shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1}, prometheus.NewRegistry())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	topics := []string{bidgate.TopicAuctionClosed, bidgate.TopicAuctionCancelled, bidgate.TopicBidNotifications}
	listeners := map[string]*listener{}
	for _, topic := range topics {
		l := &listener{db: db, topic: topic, log: quiet}
		t.Cleanup(l.close)
		if l.listen(ctx); l.conn == nil {
			t.Fatalf("%s: not listening", topic)
		}
		listeners[topic] = l
	}
	auction := func(hot bool) bidgate.Auction {
		t.Helper()
		a, err := sh.CreateAuction(ctx, bidgate.NewAuction{SellerID: 9_000_001, Title: "lot", StartPrice: decimal.NewFromInt(100),
			MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: hot})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bid := func(a bidgate.Auction, bidder, amount int64) {
		t.Helper()
		if _, err := sh.PlaceBid(ctx, bidgate.BidRequest{AuctionID: a.ID, BidderID: bidder,
			Amount: decimal.NewFromInt(amount), RequestID: uuid.New()}); err != nil {
			t.Fatalf("bid %d by %d: %v", amount, bidder, err)
		}
	}
	event := func(topic string) func() {
		return func() {
			err := (&pgstore.Store{DB: db}).AddEvents(ctx, topic, []pgstore.Event{{AggregateID: 1, Payload: []byte(`{}`)}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	var cold bidgate.Auction
	var logged []bidgate.BidAccepted // a hot auction's, the second bid outbidding the first
	cases := []struct {
		name  string
		topic string // the only one woken
		setup func() // before its notifications are drained
		act   func()
	}{
		{name: "auction closed", topic: bidgate.TopicAuctionClosed, act: event(bidgate.TopicAuctionClosed)},
		{name: "auction cancelled", topic: bidgate.TopicAuctionCancelled, act: event(bidgate.TopicAuctionCancelled)},
		{name: "notices", topic: bidgate.TopicBidNotifications, act: event(bidgate.TopicBidNotifications)},
		{name: "a cold bid that outbids", topic: bidgate.TopicBidNotifications,
			setup: func() { cold = auction(false); bid(cold, 1, 110) },
			act:   func() { bid(cold, 2, 120) }},
		{name: "hot rows that outbid, notices queued", topic: bidgate.TopicBidNotifications,
			setup: func() {
				a := auction(true)
				bid(a, 1, 110)
				bid(a, 2, 120)
				logs, err := redisstore.New(rdb).ReadLogs(ctx, []redisstore.LogRange{{AuctionID: a.ID}}, 10)
				if err != nil || len(logs[0]) != 2 || logs[0][1].Outbid != 1 {
					t.Fatalf("log %v: %v", logs, err)
				}
				logged = logs[0]
			},
			act: func() {
				err := pgstore.InTx(ctx, db, func(tx pgx.Tx) error {
					_, err := pgstore.WriteHotBids(ctx, tx, logged, pgstore.QueueOutbidNotices)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup()
			}
			for topic, l := range listeners {
				for l.wait(ctx, 200*time.Millisecond) {
				}
				if l.conn == nil {
					t.Fatalf("%s: lost its connection", topic)
				}
			}
			c.act()
			if !listeners[c.topic].wait(ctx, 10*time.Second) {
				t.Fatalf("%s: not woken", c.topic)
			}
			for _, topic := range topics {
				// Delivered at the same commit as the one above.
				if topic != c.topic && listeners[topic].wait(ctx, 200*time.Millisecond) {
					t.Errorf("%s: woken by %s", topic, c.name)
				}
			}
		})
	}
}
