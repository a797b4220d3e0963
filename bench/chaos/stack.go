//go:build chaos

package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"bidgate/internal/auth"
	"bidgate/internal/testport"
)

// Readiness bounds: how long a server may take to come up before the
// scenario fails.
const (
	storeReadyTimeout = 60 * time.Second
	nodeReadyTimeout  = 90 * time.Second
)

// stack is one scenario's system, all in one temporary directory: its own
// PostgreSQL, Redis (one server, or a cluster) and Kafka-protocol broker,
// and three bidgate nodes.
type stack struct {
	dir  string
	bin  string // the bidgate binary
	logf func(format string, args ...any)

	secret    string // BIDGATE_CLUSTER_SECRET: signs forwarded bids
	gossipKey string // BIDGATE_CLUSTER_KEY: encrypts gossip
	eventKey  string // BIDGATE_EVENT_SIGNING_KEY: signs the Kafka messages
	// devKey is the private key file every node trusts bearer tokens from
	// (--dev-key); key is it loaded, for the bench to mint with.
	devKey string
	key    *auth.SigningKey

	pg           *postgres
	redis        *proc // nil on a Redis Cluster
	redisPort    int
	redisCluster *redisCluster // nil on one Redis
	waitReplicas int           // the nodes' --redis-wait-replicas
	broker       *proc
	brokerPort   int
	nodes        []*node

	mu     sync.Mutex
	deaths []death
}

// node is one `bidgate serve` process and its ports.
type node struct {
	id                     string
	http, internal, gossip int
	proc                   *proc
}

// death is a process exit nobody asked for.
type death struct {
	name string
	at   time.Time
	err  error
}

func (d death) String() string {
	return fmt.Sprintf("%s exited at %s: %s", d.name, d.at.Format("15:04:05.000"), exitText(d.err))
}

// The lines the stores and the broker log once they serve.
const (
	redisReadyLine  = "Ready to accept connections"
	brokerReadyLine = "listening"
)

// redisSetup is the Redis a scenario runs on.
type redisSetup struct {
	// cluster: a Redis Cluster of 3 primaries and 3 replicas
	// (internal/testredis/redis-cluster.sh) instead of one server with an
	// append-only file.
	cluster bool
	// waitReplicas is the nodes' --redis-wait-replicas.
	waitReplicas int
}

// newStack creates the dev key the nodes trust, starts PostgreSQL, Redis,
// the broker and three nodes, each waited for, and migrates the database
// first.
func newStack(ctx context.Context, bin string, nodes int, rs redisSetup, logf func(string, ...any)) (s *stack, err error) {
	dir, err := os.MkdirTemp("", "bidgate-chaos-")
	if err != nil {
		return nil, fmt.Errorf("stack directory: %w", err)
	}
	// The postgres user must get through to its own subdirectory.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("stack directory: %w", err)
	}
	s = &stack{dir: dir, bin: bin, logf: logf, secret: randomHex(32), gossipKey: randomHex(32),
		eventKey: randomBase64(32), waitReplicas: rs.waitReplicas}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close(context.WithoutCancel(ctx), false))
		}
	}()
	// Created before any node starts, so that the nodes only read it and
	// do not race to create it.
	s.devKey = filepath.Join(dir, "dev-key.pem")
	if s.key, _, err = auth.LoadOrCreateKey(s.devKey); err != nil {
		return s, fmt.Errorf("the dev key: %w", err)
	}
	pgPort, err := testport.Next()
	if err != nil {
		return s, err
	}
	if s.pg, err = newPostgres(ctx, dir, pgPort, s.died); err != nil {
		return s, err
	}
	if err := s.pg.start(ctx); err != nil {
		return s, err
	}
	if err := s.pg.createDB(ctx, "bidgate"); err != nil {
		return s, err
	}
	if rs.cluster {
		if s.redisCluster, err = startRedisCluster(ctx, clusterScript, filepath.Join(dir, "redis-cluster")); err != nil {
			return s, err
		}
	} else if err := s.startRedis(ctx); err != nil {
		return s, err
	}
	if err := s.startBroker(ctx); err != nil {
		return s, err
	}
	if err := runOnce(ctx, s.logPath("migrate"), nil, dir, childEnv(), bin, "migrate", "--postgres-url", s.postgresURL()); err != nil {
		return s, fmt.Errorf("migrate: %w", err)
	}
	for i := range nodes {
		n := &node{id: fmt.Sprintf("n%d", i+1)}
		for _, port := range []*int{&n.http, &n.internal, &n.gossip} {
			if *port, err = testport.Next(); err != nil {
				return s, err
			}
		}
		n.proc = &proc{name: n.id, path: bin, env: s.nodeEnv(), dir: dir, logPath: s.logPath(n.id), onDeath: s.died}
		s.nodes = append(s.nodes, n)
		if err := s.startNode(ctx, n); err != nil {
			return s, err
		}
	}
	return s, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b)
}

// randomBase64 is n random bytes in standard base64: an event-signing key
// for n = 32.
func randomBase64(n int) string {
	b, _ := hex.DecodeString(randomHex(n))
	return base64.StdEncoding.EncodeToString(b)
}

func (s *stack) logPath(name string) string { return filepath.Join(s.dir, name+".log") }

func (s *stack) postgresURL() string { return s.pg.url("bidgate") }

// redisAddr is the nodes' --redis-addrs: several addresses mean a cluster.
func (s *stack) redisAddr() string {
	if s.redisCluster != nil {
		return strings.Join(s.redisCluster.addrs, ",")
	}
	return testport.Loopback(s.redisPort)
}

func (s *stack) brokerAddr() string { return testport.Loopback(s.brokerPort) }

// targets are the nodes' base URLs, the bench's --targets.
func (s *stack) targets() string {
	var out []string
	for _, n := range s.nodes {
		out = append(out, "http://"+testport.Loopback(n.http))
	}
	return strings.Join(out, ",")
}

// died records an exit nobody asked for; the scenario fails on it.
func (s *stack) died(name string, at time.Time, err error) {
	s.mu.Lock()
	d := death{name: name, at: at, err: err}
	s.deaths = append(s.deaths, d)
	s.mu.Unlock()
	s.logf("UNEXPECTED EXIT: %s", d)
}

// unexpectedDeaths lists the exits nobody asked for so far.
func (s *stack) unexpectedDeaths() []death {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]death(nil), s.deaths...)
}

// procs is every long-running process of the stack.
func (s *stack) procs() []*proc {
	var out []*proc
	if s.pg != nil {
		out = append(out, s.pg.proc)
	}
	if s.redis != nil {
		out = append(out, s.redis)
	}
	if s.broker != nil {
		out = append(out, s.broker)
	}
	for _, n := range s.nodes {
		out = append(out, n.proc)
	}
	return out
}

// notAlive names the processes that are not running.
func (s *stack) notAlive() []string {
	var out []string
	for _, p := range s.procs() {
		if !p.alive() {
			out = append(out, p.name)
		}
	}
	return out
}

// startRedis runs Redis with an append-only file fsynced on every write and
// no RDB snapshots, in the foreground so that it can be killed and started
// again on the same file.
func (s *stack) startRedis(ctx context.Context) error {
	port, err := testport.Next()
	if err != nil {
		return err
	}
	s.redisPort = port
	dir := filepath.Join(s.dir, "redis")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("the Redis directory: %w", err)
	}
	s.redis = &proc{name: "redis", path: "redis-server", env: childEnv(), dir: dir, logPath: s.logPath("redis"), onDeath: s.died}
	args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--appendonly", "yes", "--appendfsync", "always",
		"--dir", dir, "--save", "", "--daemonize", "no"}
	if err := s.redis.start(args, redisReadyLine); err != nil {
		return err
	}
	return s.awaitReady(ctx, s.redis, storeReadyTimeout)
}

// startBroker runs `bidgate broker`, which creates the topics at every
// start and keeps messages in memory only.
func (s *stack) startBroker(ctx context.Context) error {
	port, err := testport.Next()
	if err != nil {
		return err
	}
	s.brokerPort = port
	s.broker = &proc{name: "broker", path: s.bin, env: childEnv(), dir: s.dir, logPath: s.logPath("broker"), onDeath: s.died}
	if err := s.broker.start([]string{"broker", "--port", fmt.Sprint(port)}, brokerReadyLine); err != nil {
		return err
	}
	return s.awaitReady(ctx, s.broker, storeReadyTimeout)
}

// restartStore starts a killed Redis or broker again with the same
// arguments (same port, same files) and waits until it serves.
func (s *stack) restartStore(ctx context.Context, p *proc, readyLine string) error {
	if err := p.restart(readyLine); err != nil {
		return err
	}
	return s.awaitReady(ctx, p, storeReadyTimeout)
}

func (s *stack) awaitReady(ctx context.Context, p *proc, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.waitReady(wctx); err != nil {
		return fmt.Errorf("%w\n--- %s log ---\n%s", err, p.name, p.tail(30))
	}
	return nil
}

// close stops everything (nodes gracefully, the rest at once) and removes
// the directory unless keep.
func (s *stack) close(ctx context.Context, keep bool) error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.proc.stop(ctx, 10*time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, p := range []*proc{s.broker, s.redis} {
		if p != nil && p.alive() {
			errs = append(errs, p.kill(ctx))
		}
	}
	if s.redisCluster != nil {
		errs = append(errs, s.redisCluster.stop(ctx))
	}
	if s.pg != nil {
		if err := s.pg.stop(ctx, "immediate"); err != nil {
			errs = append(errs, err, s.pg.proc.kill(ctx))
		}
	}
	if !keep {
		errs = append(errs, os.RemoveAll(s.dir))
	} else {
		s.logf("kept the stack's directory %s", s.dir)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tear the stack down: %w", err)
	}
	return nil
}

// tails is the end of every process's log, for a failure report.
func (s *stack) tails(lines int) string {
	var b strings.Builder
	for _, p := range s.procs() {
		fmt.Fprintf(&b, "--- %s (%s), last %d lines ---\n%s\n", p.name, p.logPath, lines, p.tail(lines))
	}
	return b.String()
}

// copyLogs copies every log file of the stack into dst.
func (s *stack) copyLogs(dst string) error {
	logs, err := filepath.Glob(filepath.Join(s.dir, "*.log"))
	if err != nil {
		return fmt.Errorf("list logs: %w", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	for _, l := range logs {
		if err := copyFile(l, filepath.Join(dst, filepath.Base(l))); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("copy %s: %w", src, cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
