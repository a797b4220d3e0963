package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"bidgate/persist"
	"bidgate/persist/kafka"
)

// devConfig is `bidgate dev`: a local cluster of node processes.
type devConfig struct {
	Nodes       int
	BasePort    int
	PostgresURL string
	RedisAddrs  string
	KafkaPort   int
	Partitions  int
}

func parseDevConfig(args []string) (devConfig, error) {
	var c devConfig
	fs := flag.NewFlagSet("bidgate dev", flag.ContinueOnError)
	fs.IntVar(&c.Nodes, "nodes", 3, "number of node processes")
	fs.IntVar(&c.BasePort, "base-port", 8080, "node i serves its API on base-port+i-1, its internal endpoint on base-port+100+i-1 and gossips on base-port+200+i-1")
	fs.StringVar(&c.PostgresURL, "postgres-url", envOr("BIDGATE_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/bidgate?sslmode=disable"), "PostgreSQL connection URL")
	fs.StringVar(&c.RedisAddrs, "redis-addrs", envOr("BIDGATE_REDIS_ADDRS", "127.0.0.1:6379"), "Redis address(es)")
	fs.IntVar(&c.KafkaPort, "kafka-embedded-port", 9092, "port of the embedded Kafka broker the nodes share")
	fs.IntVar(&c.Partitions, "kafka-partitions", 8, "partitions of the topics")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Nodes < 1 || c.Nodes > 32 {
		return c, fmt.Errorf("--nodes must be from 1 to 32, got %d", c.Nodes)
	}
	if c.BasePort < 1 || c.BasePort+200+c.Nodes > 65535 {
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

// dev runs the embedded Kafka broker in this process and the nodes as child
// processes of this binary, all on loopback, until ctx ends; then it stops
// them (SIGTERM, so they leave the cluster and drain) and waits.
func dev(ctx context.Context, c devConfig) error {
	db, err := persist.Open(ctx, c.PostgresURL, 2)
	if err != nil {
		return err
	}
	_, err = persist.Migrate(ctx, db)
	db.Close()
	if err != nil {
		return err
	}
	broker, err := kafka.StartEmbedded(c.KafkaPort, c.Partitions)
	if err != nil {
		return err
	}
	defer broker.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)

	fmt.Printf("bidgate dev: %d nodes, Kafka at %s\n", c.Nodes, broker.Addrs()[0])
	var procs []*devNode
	var wg sync.WaitGroup
	seed := "127.0.0.1:" + strconv.Itoa(c.BasePort+200)
	for i := range c.Nodes {
		id := fmt.Sprintf("node%d", i+1)
		args := []string{"serve",
			"--node-id", id,
			"--listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+i),
			"--internal-listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+100+i),
			"--gossip-port", strconv.Itoa(c.BasePort + 200 + i),
			"--kafka", broker.Addrs()[0],
			"--postgres-url", c.PostgresURL,
			"--redis-addrs", c.RedisAddrs,
			"--migrate=false",
		}
		if i > 0 {
			args = append(args, "--seeds", seed)
		}
		cmd := exec.Command(self, args...)
		cmd.Env = append(os.Environ(), "BIDGATE_CLUSTER_SECRET="+hex.EncodeToString(secret))
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = cmd.Stdout
		if err := cmd.Start(); err != nil {
			stopAll(procs)
			return fmt.Errorf("start %s: %w", id, err)
		}
		n := &devNode{cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(n.done) }()
		procs = append(procs, n)
		wg.Add(1)
		go func() { defer wg.Done(); prefix(id, out) }()
		fmt.Printf("  %s  http://127.0.0.1:%d  (internal :%d, gossip :%d, pid %d)\n",
			id, c.BasePort+i, c.BasePort+100+i, c.BasePort+200+i, cmd.Process.Pid)
	}
	fmt.Println("Ctrl-C stops them all.")

	exited := make(chan string, len(procs))
	for i, n := range procs {
		go func() { <-n.done; exited <- fmt.Sprintf("node%d", i+1) }()
	}
	select {
	case <-ctx.Done():
	case id := <-exited:
		fmt.Fprintf(os.Stderr, "bidgate dev: %s exited; stopping the others\n", id)
	}
	stopAll(procs)
	wg.Wait()
	return nil
}

type devNode struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
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
