//go:build rediscluster

// Tests that need a Redis Cluster of their own: they run under make
// test-cluster (-tags rediscluster).

package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// TestSubscriberFollowsAMovedSlot: when an auction's slot moves to another
// primary, Redis drops its subscription (a sunsubscribe the Subscriber did
// not ask for); the Subscriber subscribes it again on the new owner, says
// so, and gets its updates from there. The cluster is the test's own.
func TestSubscriberFollowsAMovedSlot(t *testing.T) {
	cluster := testredis.StartCluster(t, 7460)
	rdb := cluster.Client(t)
	rs := redisstore.New(rdb)
	sub := newSubscriber(t, rdb, 16)
	id := 1<<52 + time.Now().UnixNano()%1e12
	if err := sub.Subscribe(ctx, id); err != nil {
		t.Fatal(err)
	}
	confirmed(t, sub, []int64{id})
	published(t, rs, sub, []int64{id}, 1)

	from := primary(t, rdb, id)
	var masters []*redis.Client
	var mu sync.Mutex
	if err := rdb.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	to := masters[0]
	if to.Options().Addr == from.Options().Addr {
		to = masters[1]
	}
	moveSlot(t, redisstore.Channel(id), from, to, masters)
	confirmed(t, sub, []int64{id})
	published(t, rs, sub, []int64{id}, 2)
	if n, err := to.PubSubShardNumSub(ctx, redisstore.Channel(id)).Result(); err != nil || n[redisstore.Channel(id)] != 1 {
		t.Fatalf("subscribers on the new owner: %v, %v", n, err)
	}
}

// moveSlot moves key's slot, which holds no keys, from one primary to
// another and tells every primary, the way redis-cli --cluster reshard does.
func moveSlot(t *testing.T, key string, from, to *redis.Client, masters []*redis.Client) {
	t.Helper()
	slot, err := from.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	fromID, err := from.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	toID, err := to.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		node *redis.Client
		args []any
	}
	steps := []step{
		{to, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", fromID}},
		{from, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", toID}},
	}
	for _, m := range append([]*redis.Client{from, to}, masters...) {
		steps = append(steps, step{m, []any{"CLUSTER", "SETSLOT", slot, "NODE", toID}})
	}
	for _, step := range steps {
		if err := step.node.Do(ctx, step.args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", step.args, step.node.Options().Addr, err)
		}
	}
}
