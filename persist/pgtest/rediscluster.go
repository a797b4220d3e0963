package pgtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate/internal/await"
)

// RedisCluster is a Redis Cluster of a test's own, for tests that kill its
// nodes: 3 primaries and 3 replicas started by scripts/redis-cluster.sh on
// loopback ports from a base port, stopped when the test ends.
type RedisCluster struct {
	Addrs  []string
	dir    string
	script string
}

// StartRedisCluster starts a cluster on ports port.. port+5 (and their bus
// ports, 10000 above).
func StartRedisCluster(tb testing.TB, port int) *RedisCluster {
	tb.Helper()
	script, err := findScript("scripts/redis-cluster.sh")
	if err != nil {
		tb.Fatal(err)
	}
	c := &RedisCluster{dir: tb.TempDir(), script: script}
	out, err := exec.Command(script, "start", c.dir, strconv.Itoa(port)).Output()
	if err != nil {
		tb.Fatalf("start a Redis Cluster on port %d: %v", port, err)
	}
	tb.Cleanup(func() {
		if err := exec.Command(script, "stop", c.dir).Run(); err != nil {
			tb.Errorf("stop the Redis Cluster: %v", err)
		}
	})
	c.Addrs = strings.Split(strings.TrimSpace(string(out)), ",")
	return c
}

// Client returns a client on the cluster, closed when tb ends.
func (c *RedisCluster) Client(tb testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Kill kills the redis-server behind node with SIGKILL.
func (c *RedisCluster) Kill(node *redis.Client) error {
	info, err := node.Info(context.Background(), "server").Result()
	if err != nil {
		return err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				return err
			}
			return syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return errors.New("INFO server has no process_id")
}

// AwaitPromotion waits until the cluster has promoted a primary other than
// killed for key's slot and returns its address.
func (c *RedisCluster) AwaitPromotion(tb testing.TB, rdb *redis.ClusterClient, killed, key string) string {
	tb.Helper()
	return await.Until(tb, 20*time.Second, "a replica promoted in place of "+killed, nil, func() (string, bool) {
		rdb.ReloadState(context.Background())
		p, err := rdb.MasterForKey(context.Background(), key)
		if err != nil {
			return err.Error(), false
		}
		return p.Options().Addr, p.Options().Addr != killed
	})
}

// Restart starts a killed node again; it rejoins as a replica.
func (c *RedisCluster) Restart(addr string) error {
	_, port, _ := strings.Cut(addr, ":")
	return exec.Command(c.script, "restart", c.dir, port).Run()
}

// findScript finds a file of the repository from a test's working
// directory (its package's).
func findScript(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(rel + " not found above the working directory")
		}
		dir = parent
	}
}
