package redisstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// TestSubscriber: a Subscriber keeps one connection per primary (on a
// cluster the auctions span all three), gets every auction's updates, and
// after its connections are killed subscribes every auction again, tells
// so, and gets their updates again. Malformed messages are reported, not
// taken; an unsubscribed auction leaves no subscription behind.
func TestSubscriber(t *testing.T) {
	name := "subscriber-test-" + uuid.NewString()
	rdb := named(t, testredis.Client(t), name)
	rs := redisstore.New(rdb)
	sub := newSubscriber(t, rdb, 256)

	base := 1<<52 + time.Now().UnixNano()%1e12
	var ids []int64
	primaries := map[string]bool{}
	for i := range int64(24) {
		id := base + i
		ids = append(ids, id)
		primaries[primary(t, rdb, id).Options().Addr] = true
		if err := sub.Subscribe(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, cluster := rdb.(*redis.ClusterClient); cluster && len(primaries) < 2 {
		t.Fatalf("24 auctions on %d primaries", len(primaries))
	}
	if err := sub.Subscribe(ctx, ids[0]); err == nil {
		t.Fatal("subscribed twice")
	}
	confirmed(t, sub, ids)
	conns := 0
	for addr := range primaries {
		n := connsNamed(t, addr, name)
		if n != 1 {
			t.Errorf("%d connections on %s, want 1", n, addr)
		}
		conns += n
	}
	t.Logf("%d auctions on %d primaries, %d connections", len(ids), len(primaries), conns)
	published(t, rs, sub, ids, 1)

	// Kill every connection: each auction is confirmed again, then its
	// updates flow again.
	for addr := range primaries {
		killNamed(t, addr, name)
	}
	confirmed(t, sub, ids)
	published(t, rs, sub, ids, 2)

	// Malformed messages are reported with their auction and dropped.
	for _, payload := range []string{"junk", "u1|1|100||1|OPEN|1|1"} {
		if err := rdb.SPublish(ctx, redisstore.Channel(ids[0]), payload).Err(); err != nil {
			t.Fatal(err)
		}
		ev := next(t, sub)
		if ev.AuctionID != ids[0] || ev.Err == nil {
			t.Fatalf("%q gave %+v", payload, ev)
		}
	}

	// Unsubscribed auctions leave no subscription in Redis.
	for _, id := range ids[:12] {
		sub.Unsubscribe(ctx, id)
	}
	for _, id := range ids[:12] {
		ch := redisstore.Channel(id)
		await.Until(t, 10*time.Second, "no subscriber of "+ch, nil, func() (int64, bool) {
			n, err := primary(t, rdb, id).PubSubShardNumSub(ctx, ch).Result()
			if err != nil {
				t.Fatal(err)
			}
			return n[ch], n[ch] == 0
		})
	}
	published(t, rs, sub, ids[12:], 3)
}

// newSubscriber is a Subscriber on rdb, closed when the test ends.
func newSubscriber(t *testing.T, rdb redis.UniversalClient, buffer int) *redisstore.Subscriber {
	sub := redisstore.NewSubscriber(rdb, buffer)
	t.Cleanup(func() {
		if err := sub.Close(); err != nil {
			t.Errorf("close the subscriber: %v", err)
		}
	})
	return sub
}

// named is a client like rdb whose connections carry name.
func named(t *testing.T, rdb redis.UniversalClient, name string) redis.UniversalClient {
	var c redis.UniversalClient
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		opt := *r.Options()
		opt.ClientName = name
		c = redis.NewClusterClient(&opt)
	case *redis.Client:
		opt := *r.Options()
		opt.ClientName = name
		c = redis.NewClient(&opt)
	default:
		t.Fatalf("a %T", rdb)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// primary is the client of the node that holds auction id.
func primary(t *testing.T, rdb redis.UniversalClient, id int64) *redis.Client {
	t.Helper()
	if c, ok := rdb.(*redis.ClusterClient); ok {
		p, err := c.MasterForKey(ctx, redisstore.Channel(id))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return rdb.(*redis.Client)
}

// nodeAt is a client of the node at addr, for CLIENT LIST and KILL.
func nodeAt(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// connsNamed counts the pub/sub connections named name on the node at addr.
func connsNamed(t *testing.T, addr, name string) int {
	t.Helper()
	list, err := nodeAt(t, addr).ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(list) {
		if strings.Contains(line, " name="+name+" ") && strings.Contains(line, " flags=P ") {
			n++
		}
	}
	return n
}

// killNamed kills the connections named name on the node at addr.
func killNamed(t *testing.T, addr, name string) {
	t.Helper()
	node := nodeAt(t, addr)
	list, err := node.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(list) {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
		if err := node.ClientKillByFilter(ctx, "ID", id).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// next is the subscriber's next event, bounded.
func next(t *testing.T, sub *redisstore.Subscriber) redisstore.Event {
	t.Helper()
	select {
	case ev := <-sub.Events():
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no event within 15s")
		return redisstore.Event{}
	}
}

// confirmed waits for a confirmation of every auction of ids (lost
// connections are reported on the way).
func confirmed(t *testing.T, sub *redisstore.Subscriber, ids []int64) {
	t.Helper()
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		ev := next(t, sub)
		switch {
		case ev.Subscribed:
			delete(want, ev.AuctionID)
		case ev.AuctionID == 0 && ev.Err != nil:
			t.Logf("reported: %v", ev.Err)
		default:
			t.Fatalf("before the confirmations: %+v", ev)
		}
	}
}

// published publishes an update of each auction of ids, in one pipeline
// across slots, and checks that the subscriber receives each, unchanged.
// Confirmations on the way (late ones, after churn) are skipped.
func published(t *testing.T, rs *redisstore.Store, sub *redisstore.Subscriber, ids []int64, seq int64) {
	t.Helper()
	want := map[int64]redisstore.Update{}
	var updates []redisstore.Update
	for i, id := range ids {
		u := redisstore.Update{AuctionID: id, PriceCents: 10000 + int64(i), LeaderID: int64(i + 1),
			EndUs: 1e15, Status: bidgate.StatusOpen, Seq: seq, UpdatedUs: 1e15 - 1}
		want[id] = u
		updates = append(updates, u)
	}
	if err := rs.Publish(ctx, updates...); err != nil {
		t.Fatal(err)
	}
	for len(want) > 0 {
		ev := next(t, sub)
		if ev.Subscribed || (ev.AuctionID == 0 && ev.Err != nil) {
			// A confirmation again, or news of a connection lost before
			// the publish, still in the buffer: the callers await its
			// auctions' subscriptions again before publishing.
			continue
		}
		u, ok := want[ev.AuctionID]
		if !ok || ev.Err != nil || ev.Subscribed || ev.Update != u {
			t.Fatalf("got %+v, want one of %d updates of seq %d", ev, len(want), seq)
		}
		delete(want, ev.AuctionID)
	}
}

// TestSubscriberUnderChurn: viewers come and go on many auctions at once
// while the subscriber's connections are killed, in a loop (run with
// -race). Afterwards Redis holds exactly one subscription per auction still
// subscribed and none of the others, and every subscribed auction gets its
// updates.
func TestSubscriberUnderChurn(t *testing.T) {
	name := "subscriber-churn-" + uuid.NewString()
	rdb := named(t, testredis.Client(t), name)
	rs := redisstore.New(rdb)
	sub := newSubscriber(t, rdb, 64)
	drained := make(chan struct{})
	stopDrain := make(chan struct{})
	go func() { // the reader of a real hub never stops reading either
		defer close(drained)
		for {
			select {
			case <-sub.Events():
			case <-stopDrain:
				return
			}
		}
	}()

	base := 1<<52 + time.Now().UnixNano()%1e12
	const workers, perWorker = 8, 6
	var wg sync.WaitGroup
	for w := range int64(workers) {
		wg.Go(func() {
			for round := range 20 {
				for i := range int64(perWorker) {
					if err := sub.Subscribe(ctx, base+w*perWorker+i); err != nil {
						t.Errorf("subscribe: %v", err)
						return
					}
				}
				for i := range int64(perWorker) {
					if round < 19 || i%2 == 1 {
						sub.Unsubscribe(ctx, base+w*perWorker+i)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			for _, addr := range primaryAddrs(t, rdb) {
				killNamed(t, addr, name)
			}
		}
	})
	wg.Wait()
	close(stopDrain)
	<-drained

	var subscribed []int64
	for w := range int64(workers) {
		for i := range int64(perWorker) {
			id := base + w*perWorker + i
			want := int64(0)
			if i%2 == 0 {
				want = 1
				subscribed = append(subscribed, id)
			}
			ch := redisstore.Channel(id)
			await.Until(t, 20*time.Second, "the subscriptions of "+ch, nil, func() (int64, bool) {
				n, err := primary(t, rdb, id).PubSubShardNumSub(ctx, ch).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n[ch], n[ch] == want
			})
		}
	}
	published(t, rs, sub, subscribed, 7)
}

// primaryAddrs lists the addresses of rdb's primaries.
func primaryAddrs(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return []string{rdb.(*redis.Client).Options().Addr}
	}
	var mu sync.Mutex
	var addrs []string
	if err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		addrs = append(addrs, m.Options().Addr)
		return nil
	}); err != nil {
		t.Error(err)
	}
	return addrs
}
