package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"bidgate/internal/auth"
	"bidgate/internal/retry"
	"bidgate/persist/pgstore"
)

// devConfig is `bidgate dev`: a local cluster of node processes.
type devConfig struct {
	Nodes       int
	BasePort    int
	PostgresURL string
	RedisAddrs  string
	KafkaPort   int
	Partitions  int
	DevKey      string
}

func parseDevConfig(args []string) (devConfig, error) {
	var c devConfig
	fs := flag.NewFlagSet("bidgate dev", flag.ContinueOnError)
	fs.IntVar(&c.Nodes, "nodes", 3, "number of node processes")
	fs.IntVar(&c.BasePort, "base-port", 8080, "node i serves its API on base-port+i-1, its internal endpoint on base-port+100+i-1, gossips on base-port+200+i-1 and serves its admin endpoint on base-port+300+i-1")
	fs.StringVar(&c.PostgresURL, "postgres-url", envOr("BIDGATE_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/bidgate?sslmode=disable"), "PostgreSQL connection URL")
	fs.StringVar(&c.RedisAddrs, "redis-addrs", envOr("BIDGATE_REDIS_ADDRS", "127.0.0.1:6379"), "Redis address(es)")
	fs.IntVar(&c.KafkaPort, "kafka-embedded-port", 9092, "port of the embedded Kafka broker the nodes share")
	fs.IntVar(&c.Partitions, "kafka-partitions", 8, "partitions of the topics")
	fs.StringVar(&c.DevKey, "dev-key", auth.DevKeyFile, "private key file the nodes trust tokens from (created if missing); bidgate token signs with it")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Nodes < 1 || c.Nodes > 32 {
		return c, fmt.Errorf("--nodes must be from 1 to 32, got %d", c.Nodes)
	}
	if c.BasePort < 1 || c.BasePort+300+c.Nodes > 65535 {
		return c, fmt.Errorf("--base-port %d leaves no room for %d nodes", c.BasePort, c.Nodes)
	}
	return c, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dev runs the embedded Kafka broker and the nodes as child processes of
// this binary, all on loopback, until ctx ends or a node exits; then it
// stops the nodes (SIGTERM, so they leave the cluster and drain), then the
// broker, and waits. The broker exiting stops nothing: the nodes keep
// deciding bids, as they would in production.
func dev(ctx context.Context, c devConfig) error {
	db, err := pgstore.Open(ctx, c.PostgresURL, 2)
	if err != nil {
		return err
	}
	_, err = pgstore.Migrate(ctx, db)
	db.Close()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// Created here, once, so that the nodes do not race to create it.
	if _, created, err := auth.LoadOrCreateKey(c.DevKey); err != nil {
		return err
	} else if created {
		fmt.Printf("bidgate dev: created the development signing key %s\n", c.DevKey)
	}
	// A fresh gossip key and secret per run: the dev cluster is closed to
	// any process that was not started with it.
	secret, gossipKey := make([]byte, 32), make([]byte, 32)
	rand.Read(secret)
	rand.Read(gossipKey)

	// The broker is a process of its own, as in production: it can be
	// restarted (and forgets everything) while the nodes keep running.
	brokerAddr := "127.0.0.1:" + strconv.Itoa(c.KafkaPort)
	var wg sync.WaitGroup
	broker, err := startChild(self, "broker", &wg, nil, "broker", "--port", strconv.Itoa(c.KafkaPort),
		"--partitions", strconv.Itoa(c.Partitions))
	if err != nil {
		return err
	}
	procs := []*devNode{broker}
	if err := waitListening(ctx, brokerAddr, 10*time.Second); err != nil {
		stopAll(procs)
		return fmt.Errorf("the Kafka broker: %w", err)
	}
	fmt.Printf("bidgate dev: %d nodes, Kafka broker at %s (pid %d)\n", c.Nodes, brokerAddr, broker.cmd.Process.Pid)
	seed := "127.0.0.1:" + strconv.Itoa(c.BasePort+200)
	env := []string{"BIDGATE_CLUSTER_SECRET=" + hex.EncodeToString(secret), "BIDGATE_CLUSTER_KEY=" + hex.EncodeToString(gossipKey)}
	for i := range c.Nodes {
		id := fmt.Sprintf("node%d", i+1)
		args := []string{"serve",
			"--node-id", id,
			"--listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+i),
			"--internal-listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+100+i),
			"--admin-listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+300+i),
			"--gossip-port", strconv.Itoa(c.BasePort + 200 + i),
			"--kafka", brokerAddr,
			"--postgres-url", c.PostgresURL,
			"--redis-addrs", c.RedisAddrs,
			"--migrate=false",
			"--dev-key", c.DevKey,
		}
		if i > 0 {
			args = append(args, "--seeds", seed)
		}
		n, err := startChild(self, id, &wg, env, args...)
		if err != nil {
			stopAll(procs)
			return err
		}
		procs = append(procs, n)
		fmt.Printf("  %s  http://127.0.0.1:%d  (internal :%d, gossip :%d, admin http://127.0.0.1:%d, pid %d)\n",
			id, c.BasePort+i, c.BasePort+100+i, c.BasePort+200+i, c.BasePort+300+i, n.cmd.Process.Pid)
	}
	fmt.Println("Ctrl-C stops them all.")

	exited := make(chan string, len(procs))
	for _, n := range procs[1:] {
		go func() { <-n.done; exited <- n.name }()
	}
	go func() {
		<-broker.done
		fmt.Fprintln(os.Stderr, "bidgate dev: the Kafka broker exited; the nodes go on without it")
	}()
	select {
	case <-ctx.Done():
	case id := <-exited:
		fmt.Fprintf(os.Stderr, "bidgate dev: %s exited; stopping the others\n", id)
	}
	stopAll(procs[1:])
	stopAll(procs[:1])
	wg.Wait()
	return nil
}

type devNode struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// startChild runs this binary with args as a child process whose output is
// printed with name in front of each line.
func startChild(self, name string, wg *sync.WaitGroup, env []string, args ...string) (*devNode, error) {
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	n := &devNode{name: name, cmd: cmd, done: make(chan struct{})}
	wg.Add(1)
	go func() { defer wg.Done(); prefix(name, out) }()
	go func() { _ = cmd.Wait(); close(n.done) }()
	return n, nil
}

// waitListening waits until something accepts TCP connections on addr.
// Nothing announces that across processes, so it dials, briefly, until
// timeout.
func waitListening(ctx context.Context, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		if !retry.Sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("nothing listening on %s after %s: %w", addr, timeout, err)
		}
	}
}

// stopAll asks every node to stop and kills those still running after 20s.
func stopAll(procs []*devNode) {
	for _, n := range procs {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	timeout := time.After(20 * time.Second)
	for _, n := range procs {
		select {
		case <-n.done:
		case <-timeout:
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
}

func prefix(name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fmt.Printf("%-6s | %s\n", name, sc.Text())
	}
}
