package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"bidgate/internal/retry"
)

// The ports the documentation names (bidgate dev's default --base-port and
// --kafka-embedded-port): node i serves the API on basePort+i, its
// internal endpoint on +100, gossip on +200 and the admin endpoint on +300.
// The cluster docscheck starts is laid out at nodeBasePort instead, behind
// contract-checking proxies on the API and admin ports (contract.go).
const (
	basePort  = 8080
	kafkaPort = 9092
)

// stopTimeout is how long the cluster may take to stop after SIGTERM (each
// node leaves the ring and drains; bidgate dev kills a node after 20 s).
const stopTimeout = 45 * time.Second

// cluster is a running `bidgate dev`.
type cluster struct {
	cmd   *exec.Cmd
	nodes int
	log   *os.File
	done  chan struct{} // closed when the process has exited
	err   error         // its exit, once done is closed
}

// startCluster starts bin nodes as `bidgate dev --nodes n`, its output to
// logPath, after checking that nothing else listens on its ports (an
// answer from another process would pass for the cluster's).
func startCluster(ctx context.Context, bin string, nodes int, logPath string) (*cluster, error) {
	ports := []int{kafkaPort}
	for i := range nodes {
		ports = append(ports, nodeBasePort+i, nodeBasePort+100+i, nodeBasePort+200+i, nodeBasePort+300+i)
	}
	var d net.Dialer
	for _, p := range ports {
		dialCtx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dialCtx, "tcp", "127.0.0.1:"+strconv.Itoa(p))
		cancel()
		if err == nil {
			_ = conn.Close()
			return nil, fmt.Errorf("port %d is in use: stop what listens there (a cluster of make run?) and run again", p)
		}
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("the cluster's log: %w", err)
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("the cluster's log: %w", err)
	}
	cmd := exec.Command(bin, "dev", "--nodes", strconv.Itoa(nodes), "--base-port", strconv.Itoa(nodeBasePort))
	cmd.Stdout, cmd.Stderr = log, log
	// A group of its own: a Ctrl-C reaches this process, which stops the
	// cluster in order, instead of every node at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("start %s dev: %w", bin, err)
	}
	c := &cluster{cmd: cmd, nodes: nodes, log: log, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

// awaitReady returns once every node answers GET /readyz with 200, or an
// error when the cluster exits or timeout passes first. Nothing announces
// readiness across processes, so it asks, backing off from 50 ms to 1 s.
func (c *cluster) awaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for i := range c.nodes {
		url := fmt.Sprintf("http://127.0.0.1:%d/readyz", basePort+i)
		wait := retry.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
		for {
			err := ready(ctx, client, url)
			if err == nil {
				break
			}
			select {
			case <-c.done:
				return fmt.Errorf("the cluster exited before %s answered (%v); see %s", url, c.err, c.log.Name())
			default:
			}
			if !wait.Wait(ctx) {
				return fmt.Errorf("%s not ready after %v: %v; see %s", url, timeout, err, c.log.Name())
			}
		}
	}
	return nil
}

// ready asks url once.
func ready(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// stop sends the cluster SIGTERM (each node leaves the ring and drains,
// then the broker stops) and waits for it; past stopTimeout it kills the
// whole process group.
func (c *cluster) stop() error {
	defer c.log.Close()
	select {
	case <-c.done:
		return fmt.Errorf("the cluster exited early (%v); see %s", c.err, c.log.Name())
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop the cluster: %w", err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-c.done:
		return nil
	case <-timer.C:
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("the cluster did not stop within %v of SIGTERM and was killed; see %s", stopTimeout, c.log.Name())
	}
}
