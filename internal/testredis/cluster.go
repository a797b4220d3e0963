package testredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate/internal/await"
)

// Cluster is a Redis Cluster of a test's own, for tests that kill its
// nodes: 3 primaries and 3 replicas started by redis-cluster.sh (beside this file) on
// loopback ports from a base port, stopped when the test ends.
type Cluster struct {
	Addrs  []string
	dir    string
	script string
}

// StartCluster starts a cluster on ports port.. port+5 (and their bus
// ports, 10000 above).
func StartCluster(tb testing.TB, port int) *Cluster {
	tb.Helper()
	script := script()
	c := &Cluster{dir: tb.TempDir(), script: script}
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
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Kill kills the redis-server behind node with SIGKILL.
func Kill(node *redis.Client) error {
	pid, err := PID(node)
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// PID is the process id of the redis-server behind node.
func PID(node *redis.Client) (int, error) {
	info, err := node.Info(context.Background(), "server").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO server of %s: %w", node.Options().Addr, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO server of %s has no process_id", node.Options().Addr)
}

// IsolateReplica cuts primary's replica off, as a partition would: it
// freezes the replica (SIGSTOP) and kills its replication link, so that what
// primary writes from then on exists on primary alone. resume lets the
// replica go on (SIGCONT); it finds its link gone.
func IsolateReplica(primary *redis.Client) (resume func() error, err error) {
	replica, err := replicaOf(primary)
	if err != nil {
		return nil, err
	}
	defer replica.Close()
	pid, err := PID(replica)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("freeze replica %s: %w", replica.Options().Addr, err)
	}
	resume = func() error { return syscall.Kill(pid, syscall.SIGCONT) }
	if err := primary.ClientKillByFilter(context.Background(), "TYPE", "replica").Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("cut replica %s off: %w", replica.Options().Addr, err), resume())
	}
	return resume, nil
}

// replicaOf is a client of primary's first replica.
func replicaOf(primary *redis.Client) (*redis.Client, error) {
	info, err := primary.Info(context.Background(), "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO replication of %s: %w", primary.Options().Addr, err)
	}
	for line := range strings.Lines(info) {
		// slave0:ip=127.0.0.1,port=7503,state=online,offset=...,lag=0
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "slave0:")
		if !ok {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(rest, ",") {
			switch k, v, _ := strings.Cut(kv, "="); k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		return redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, port)}), nil
	}
	return nil, fmt.Errorf("primary %s has no replica", primary.Options().Addr)
}

// AwaitPromotion waits until the cluster has promoted a primary other than
// killed for key's slot and returns its address.
func (c *Cluster) AwaitPromotion(tb testing.TB, rdb *redis.ClusterClient, killed, key string) string {
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
func (c *Cluster) Restart(addr string) error {
	_, port, _ := strings.Cut(addr, ":")
	return exec.Command(c.script, "restart", c.dir, port).Run()
}

// script is redis-cluster.sh, found beside this file: tests run in their
// own package's directory, and make test-cluster runs it too.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "redis-cluster.sh")
}
