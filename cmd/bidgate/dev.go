package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"bidgate/gateway"
	"bidgate/internal/auth"
	"bidgate/internal/retry"
	"bidgate/internal/settings"
)

// How long the dev cluster waits for its broker to listen, and for its
// processes to stop before it kills them.
const (
	brokerStartTimeout = 10 * time.Second
	stopTimeout        = 20 * time.Second
)

// devConfig is `bidgate dev`: a local cluster of node processes.
type devConfig struct {
	Nodes    int
	BasePort int
	Postgres settings.Postgres // its URL: the nodes size their pools
	Redis    settings.Redis    // its addresses
	Broker   settings.Broker   // the embedded broker the nodes share
	DevKey   string
}

func parseDevConfig(args []string) (devConfig, error) {
	var c devConfig
	fs := settings.NewFlagSet("bidgate dev")
	fs.IntVar(&c.Nodes, "nodes", 3, "number of node processes")
	fs.IntVar(&c.BasePort, "base-port", defaultBasePort(), "node i serves its API on base-port+i-1, its internal endpoint on base-port+100+i-1, gossips on base-port+200+i-1 and serves its admin endpoint on base-port+300+i-1")
	c.Postgres.RegisterURL(fs)
	c.Redis.RegisterAddrs(fs)
	c.Broker.Register(fs, "kafka-embedded-port", "kafka-partitions")
	fs.StringVar(&c.DevKey, "dev-key", auth.DevKeyFile, "private key file the nodes trust tokens from (created if missing); bidgate token signs with it")
	fs.Check(c.checkLayout, nil)
	err := fs.Parse(args)
	return c, err
}

// defaultBasePort is the port of a lone node's API, so that node 1 of the
// dev cluster answers where a single node would.
func defaultBasePort() int {
	_, port, _ := net.SplitHostPort(gateway.DefaultConfig().Listen)
	p, _ := strconv.Atoi(port)
	return p
}

// checkLayout makes sure the nodes' ports fit.
func (c *devConfig) checkLayout() error {
	if c.Nodes < 1 || c.Nodes > 32 {
		return fmt.Errorf("--nodes must be from 1 to 32, got %d", c.Nodes)
	}
	if c.BasePort < 1 || c.BasePort+300+c.Nodes > 65535 {
		return fmt.Errorf("--base-port %d leaves no room for %d nodes", c.BasePort, c.Nodes)
	}
	return nil
}

// dev runs the embedded Kafka broker and the nodes as child processes of
// this binary, all on loopback, until ctx ends or a node exits; then it
// stops the nodes (SIGTERM, so they leave the cluster and drain), then the
// broker, and waits. The broker exiting stops nothing: the nodes keep
// deciding bids, as they would in production.
func dev(ctx context.Context, c devConfig) error {
	if _, err := applyMigrations(ctx, c.Postgres.URL); err != nil {
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
	var wg sync.WaitGroup
	broker, err := startDevBroker(ctx, self, c, &wg)
	if err != nil {
		return err
	}
	nodes, err := startDevNodes(self, c, &wg)
	if err != nil {
		stopAll(nodes)
		stopAll([]*devNode{broker})
		return err
	}
	fmt.Println("Ctrl-C stops them all.")
	waitForEnd(ctx, broker, nodes)
	stopAll(nodes)
	stopAll([]*devNode{broker})
	wg.Wait()
	return nil
}

// startDevBroker starts the broker, a process of its own as in production:
// it can be restarted (and forgets everything) while the nodes keep
// running. It returns once the broker listens.
func startDevBroker(ctx context.Context, self string, c devConfig, wg *sync.WaitGroup) (*devNode, error) {
	broker, err := startChild(self, "broker", wg, nil, "broker", "--port", strconv.Itoa(c.Broker.Port),
		"--partitions", strconv.Itoa(c.Broker.Partitions))
	if err != nil {
		return nil, err
	}
	if err := waitListening(ctx, c.brokerAddr(), brokerStartTimeout); err != nil {
		stopAll([]*devNode{broker})
		return nil, fmt.Errorf("the Kafka broker: %w", err)
	}
	fmt.Printf("bidgate dev: %d nodes, Kafka broker at %s (pid %d)\n", c.Nodes, c.brokerAddr(), broker.cmd.Process.Pid)
	return broker, nil
}

func (c devConfig) brokerAddr() string { return "127.0.0.1:" + strconv.Itoa(c.Broker.Port) }

// startDevNodes starts the nodes, the first a new cluster and the others
// joining it, with a fresh gossip key, secret and event-signing key: the
// dev cluster is closed to any process that was not started with them. On
// an error it returns the nodes it started.
func startDevNodes(self string, c devConfig, wg *sync.WaitGroup) ([]*devNode, error) {
	secret, gossipKey, eventKey := make([]byte, 32), make([]byte, 32), make([]byte, 32)
	rand.Read(secret)
	rand.Read(gossipKey)
	rand.Read(eventKey) // any 32 bytes are an Ed25519 seed
	env := []string{settings.EnvName("cluster-secret") + "=" + hex.EncodeToString(secret),
		settings.EnvName("cluster-key") + "=" + hex.EncodeToString(gossipKey),
		settings.EnvName("event-signing-key") + "=" + base64.StdEncoding.EncodeToString(eventKey)}
	if procs, ok := coreShare(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0), c.Nodes); ok {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(procs))
		fmt.Printf("bidgate dev: each node schedules on %d of the %d cores they share (GOMAXPROCS)\n", procs, runtime.GOMAXPROCS(0))
	}
	var nodes []*devNode
	for i := range c.Nodes {
		id := fmt.Sprintf("node%d", i+1)
		n, err := startChild(self, id, wg, env, c.nodeArgs(i, id)...)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, n)
		fmt.Printf("  %s  http://127.0.0.1:%d  (internal :%d, gossip :%d, admin http://127.0.0.1:%d, pid %d)\n",
			id, c.BasePort+i, c.BasePort+100+i, c.BasePort+200+i, c.BasePort+300+i, n.cmd.Process.Pid)
	}
	return nodes, nil
}

// coreShare is the GOMAXPROCS of each of n nodes sharing cores: a share
// each, as each would have cores of its own in production. Every node on
// all the cores makes n runtimes spin and park threads against each other
// (measured with three nodes on two cores). It is not set (false) for a
// lone node, which keeps them all, nor over a GOMAXPROCS the user set.
func coreShare(set string, cores, n int) (int, bool) {
	if set != "" || n <= 1 {
		return 0, false
	}
	return max(1, cores/n), true
}

// nodeArgs are the arguments of the i-th node, id, of the layout
// --base-port describes.
func (c devConfig) nodeArgs(i int, id string) []string {
	args := []string{"serve",
		"--node-id", id,
		"--listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+i),
		"--internal-listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+100+i),
		"--admin-listen", fmt.Sprintf("127.0.0.1:%d", c.BasePort+300+i),
		"--gossip-port", strconv.Itoa(c.BasePort + 200 + i),
		"--kafka", c.brokerAddr(),
		"--postgres-url", c.Postgres.URL,
		"--redis-addrs", c.Redis.Addrs,
		"--migrate=false",
		"--dev-key", c.DevKey,
	}
	if i > 0 {
		args = append(args, "--seeds", "127.0.0.1:"+strconv.Itoa(c.BasePort+200))
	}
	return args
}

// waitForEnd returns when ctx ends or a node exits. The broker exiting
// ends nothing.
func waitForEnd(ctx context.Context, broker *devNode, nodes []*devNode) {
	exited := make(chan string, len(nodes))
	for _, n := range nodes {
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

// stopAll asks every process to stop and kills those still running after
// stopTimeout.
func stopAll(procs []*devNode) {
	for _, n := range procs {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	timeout := time.After(stopTimeout)
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
