//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"bidgate/internal/testport"
)

// nodeArgs are the flags of one `bidgate serve`, in one place so that they
// are easy to adjust when the binary's flags change. seeds are the gossip
// addresses of the nodes running when it starts (none for the first node).
func (s *stack) nodeArgs(n *node, seeds []string) []string {
	args := []string{"serve",
		"--node-id", n.id,
		"--listen", testport.Loopback(n.http),
		"--internal-listen", testport.Loopback(n.internal),
		"--admin-listen", "127.0.0.1:0",
		"--gossip-bind", "127.0.0.1",
		"--gossip-port", strconv.Itoa(n.gossip),
		"--kafka", s.brokerAddr(),
		"--postgres-url", s.postgresURL(),
		"--redis-addrs", s.redisAddr(),
		"--postgres-conns", "12",
		"--migrate=false",
		"--dev-key", s.devKey,
	}
	if len(seeds) > 0 {
		args = append(args, "--seeds", strings.Join(seeds, ","))
	}
	if s.waitReplicas > 0 {
		args = append(args, "--redis-wait-replicas", strconv.Itoa(s.waitReplicas))
	}
	return args
}

// nodeEnv carries the secrets, so that they do not show in ps.
func (s *stack) nodeEnv() []string {
	return childEnv("BIDGATE_CLUSTER_SECRET="+s.secret, "BIDGATE_CLUSTER_KEY="+s.gossipKey,
		"BIDGATE_EVENT_SIGNING_KEY="+s.eventKey)
}

// seedsFor are the gossip addresses of the other nodes now running: a
// restarted node joins the cluster through them (the first node of a fresh
// stack has none and starts the cluster). Seeding a restarted first node
// from the others keeps one cluster instead of two.
func (s *stack) seedsFor(n *node) []string {
	var out []string
	for _, o := range s.nodes {
		if o != n && o.proc.alive() {
			out = append(out, testport.Loopback(o.gossip))
		}
	}
	return out
}

// startNode starts n (again) and waits until its /readyz answers 200.
func (s *stack) startNode(ctx context.Context, n *node) error {
	if err := n.proc.start(s.nodeArgs(n, s.seedsFor(n)), ""); err != nil {
		return err
	}
	return s.waitNodeReady(ctx, n)
}

// waitNodeReady polls GET /readyz until it answers 200. A node is a process
// of its own: there is no event to await across processes, so a bounded
// poll it is. It fails at once if the node exits.
func (s *stack) waitNodeReady(ctx context.Context, n *node) error {
	wctx, cancel := context.WithTimeout(ctx, nodeReadyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		status, err := readyz(wctx, n)
		switch {
		case err == nil && status == http.StatusOK:
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("GET /readyz answered %d", status)
		}
		select {
		case <-tick.C:
		case <-n.proc.exited():
			return fmt.Errorf("%s exited before it was ready: %s\n--- %s log ---\n%s", n.id, exitText(n.proc.exitErr()), n.id, n.proc.tail(40))
		case <-wctx.Done():
			return fmt.Errorf("%s not ready after %s (%s)\n--- %s log ---\n%s", n.id, nodeReadyTimeout, last, n.id, n.proc.tail(40))
		}
	}
}

// readyClient never reuses a connection, so that each probe sees whether
// the node accepts new ones.
var readyClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// readyz is one GET /readyz, with a 1 s budget.
func readyz(ctx context.Context, n *node) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+testport.Loopback(n.http)+"/readyz", nil)
	if err != nil {
		return 0, fmt.Errorf("readyz request: %w", err)
	}
	resp, err := readyClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET /readyz of %s: %w", n.id, err)
	}
	if err := resp.Body.Close(); err != nil {
		return 0, fmt.Errorf("GET /readyz of %s: %w", n.id, err)
	}
	return resp.StatusCode, nil
}

// restartNode starts a node that has exited again, with the same flags
// (and the running nodes as seeds), and waits until it is ready.
func (s *stack) restartNode(ctx context.Context, n *node) error {
	if n.proc.alive() {
		return fmt.Errorf("restart %s: it is still running", n.id)
	}
	return s.startNode(ctx, n)
}
