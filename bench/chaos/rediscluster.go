//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// clusterScript is internal/testredis/redis-cluster.sh of this checkout (TestMain
// sets it).
var clusterScript string

// redisClusterBase is the first port of a scenario's Redis Cluster (6
// ports, and their bus ports 10000 above); scenarios run one at a time.
const redisClusterBase = 7500

// redisCluster is a scenario's Redis Cluster of 3 primaries and 3 replicas,
// started by internal/testredis/redis-cluster.sh. Its servers are daemons outside the
// stack's process list: the scenario kills one of them on purpose.
type redisCluster struct {
	script, dir string
	addrs       []string
}

func startRedisCluster(ctx context.Context, script, dir string) (*redisCluster, error) {
	c := &redisCluster{script: script, dir: dir}
	out, err := exec.CommandContext(ctx, script, "start", dir, strconv.Itoa(redisClusterBase)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("start a Redis Cluster on %d: %w", redisClusterBase, err)
	}
	c.addrs = strings.Split(strings.TrimSpace(string(out)), ",")
	return c, nil
}

func (c *redisCluster) stop(ctx context.Context) error {
	if err := exec.CommandContext(ctx, c.script, "stop", c.dir).Run(); err != nil {
		return fmt.Errorf("stop the Redis Cluster: %w", err)
	}
	return nil
}

// restart starts the node at addr again on its files; it rejoins as a
// replica.
func (c *redisCluster) restart(ctx context.Context, addr string) error {
	_, port, _ := strings.Cut(addr, ":")
	if err := exec.CommandContext(ctx, c.script, "restart", c.dir, port).Run(); err != nil {
		return fmt.Errorf("restart Redis %s: %w", addr, err)
	}
	return nil
}

// replicaLag is how long the replica is cut off before its primary dies.
const replicaLag = time.Second

// redisFailover makes a Redis Cluster lose its primary while the replica
// lags, as in a partition: the replica of the primary that holds a hot
// auction is frozen (SIGSTOP) and its replication link killed, so that for
// replicaLag what the primary acknowledges exists on the primary only;
// then the primary is killed with SIGKILL and the replica goes on. The
// cluster promotes it with what it had. Once it is promoted, the killed
// server is started again and rejoins as its replica.
func redisFailover(ctx context.Context, s *stack, tl *timeline) error {
	c := s.redisCluster
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs})
	defer rdb.Close()
	id, err := s.hotAuction(ctx)
	if err != nil {
		return err
	}
	key := redisstore.KeysOf(id).State
	primary, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		return fmt.Errorf("the primary of hot auction %d: %w", id, err)
	}
	killed := primary.Options().Addr
	tl.begin(fmt.Sprintf("cut off the replica of primary %s (hot auction %d)", killed, id))
	resume, err := testredis.IsolateReplica(primary)
	if err != nil {
		return err
	}
	defer resume() // on the way out of an error; harmless after the first
	if err := hold(ctx, replicaLag); err != nil {
		return err
	}
	tl.mark("kill -9 primary " + killed + ", resume the replica")
	if err := testredis.Kill(primary); err != nil {
		return fmt.Errorf("kill redis %s: %w", killed, err)
	}
	if err := resume(); err != nil {
		return fmt.Errorf("resume the replica: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rdb.ReloadState(ctx)
		if p, err := rdb.MasterForKey(ctx, key); err == nil && p.Options().Addr != killed {
			tl.mark("replica " + p.Options().Addr + " promoted; start " + killed + " again")
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no replica promoted in place of %s within 30s", killed)
		}
		if err := hold(ctx, 100*time.Millisecond); err != nil { // polling the cluster's own view
			return err
		}
	}
	if err := c.restart(ctx, killed); err != nil {
		return err
	}
	tl.finish(killed + " back as a replica")
	return nil
}

// hotAuction is an open hot auction of the load.
func (s *stack) hotAuction(ctx context.Context) (int64, error) {
	conn, err := pgx.Connect(ctx, s.postgresURL())
	if err != nil {
		return 0, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var id int64
	err = conn.QueryRow(ctx, `SELECT id FROM auction WHERE mode = 'HOT' AND status = 'OPEN' ORDER BY id LIMIT 1`).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("find a hot auction: %w", err)
	}
	return id, nil
}
