// Package testredis gives tests a client on the local Redis (or on the Redis
// Cluster of make test-cluster), and Redis Clusters of their own to kill
// nodes of.
package testredis

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Client returns a client on the test Redis server (BIDGATE_TEST_REDIS_ADDR,
// default 127.0.0.1:6379), or on the Redis Cluster whose nodes
// BIDGATE_TEST_REDIS_CLUSTER lists (make test-cluster), closed when tb ends.
func Client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	var rdb redis.UniversalClient
	addr := os.Getenv("BIDGATE_TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	if cluster := os.Getenv("BIDGATE_TEST_REDIS_CLUSTER"); cluster != "" {
		addr = cluster
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(cluster, ",")})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addr})
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("connect to the test Redis server (%s): %v", addr, err)
	}
	tb.Cleanup(func() {
		if err := rdb.Close(); err != nil {
			tb.Errorf("close the test Redis client: %v", err)
		}
	})
	return rdb
}
