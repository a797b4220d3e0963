package ring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// testLog discards logs unless RING_TEST_LOG is set (memberlist goroutines
// may still log just after a test ends, so t.Log is not an option).
func testLog() *slog.Logger {
	if os.Getenv("RING_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// recorder keeps the changes a node's OnChange saw and pokes its watchers
// after each: OnChange comes after the owner table that includes the
// change, so a watcher woken by it sees the new table.
type recorder struct {
	mu       sync.Mutex
	changes  []Change
	watchers map[chan struct{}]struct{}
}

func (rc *recorder) add(c Change) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.changes = append(rc.changes, c)
	for w := range rc.watchers {
		select {
		case w <- struct{}{}:
		default: // a poke is pending already
		}
	}
}

// watch pokes w (of capacity 1) after every change until stop is called.
func (rc *recorder) watch(w chan struct{}) (stop func()) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.watchers == nil {
		rc.watchers = map[chan struct{}]struct{}{}
	}
	rc.watchers[w] = struct{}{}
	return func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		delete(rc.watchers, w)
	}
}

// hasID reports whether any change was about a member of node id.
func (rc *recorder) hasID(id string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.ContainsFunc(rc.changes, func(c Change) bool { return c.Member.ID == id })
}

func (rc *recorder) has(kind, name string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.ContainsFunc(rc.changes, func(c Change) bool { return c.Kind == kind && c.Member.Name == name })
}

type testNode struct {
	*Ring
	reg     *prometheus.Registry
	changes *recorder
}

// clusterLabel is the tests' memberlist hook (Config.tune): every test gets
// its own memberlist label, so that a port released by one parallel test
// and reused by another never merges their clusters. Everything else, the
// failure detection timing included, is as in production.
func clusterLabel(t testing.TB) func(*memberlist.Config) {
	label := fmt.Sprintf("bidgate-test-%s", t.Name())
	return func(mc *memberlist.Config) { mc.Label = label }
}

// startNode joins a real memberlist node on loopback, with the shard role
// unless edit says otherwise. It is shut down when the test ends.
func startNode(t testing.TB, id string, seeds []string, edit func(*Config)) *testNode {
	t.Helper()
	n := &testNode{reg: prometheus.NewRegistry(), changes: &recorder{}}
	cfg := Config{
		NodeID:       id,
		Seeds:        seeds,
		Roles:        []string{RoleShard},
		InternalAddr: "127.0.0.1:9001",
		PublicAddr:   "127.0.0.1:8001",
		Log:          testLog(),
		OnChange:     n.changes.add,
		tune:         clusterLabel(t),
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Join(ctx, cfg, n.reg)
	if err != nil {
		t.Fatalf("Join %s: %v", id, err)
	}
	t.Cleanup(func() {
		if err := r.Shutdown(); err != nil { // nil after Leave
			t.Errorf("Shutdown %s: %v", id, err)
		}
	})
	n.Ring = r
	return n
}

// startCluster starts n shard nodes, node1 first, the others seeded with it,
// and waits until every node sees all of them on its ring.
func startCluster(t testing.TB, n int) []*testNode {
	t.Helper()
	nodes := []*testNode{startNode(t, "node1", nil, nil)}
	for i := 2; i <= n; i++ {
		nodes = append(nodes, startNode(t, fmt.Sprintf("node%d", i), []string{nodes[0].Addr()}, nil))
	}
	waitFor(t, 10*time.Second, fmt.Sprintf("%d nodes to see %d shards", n, n), nodes, func() bool { return converged(nodes) })
	return nodes
}

// watchChanges returns a channel poked after every membership change seen
// by any of nodes, and the function that stops the watching.
func watchChanges(nodes []*testNode) (<-chan struct{}, func()) {
	changed := make(chan struct{}, 1)
	stops := make([]func(), len(nodes))
	for i, n := range nodes {
		stops[i] = n.changes.watch(changed)
	}
	return changed, func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// waitFor checks cond about nodes' view of the cluster after each change
// they see, until it holds, failing the test after timeout. It returns how
// long it took.
func waitFor(t testing.TB, timeout time.Duration, what string, nodes []*testNode, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	changed, stop := watchChanges(nodes)
	defer stop()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
	return time.Since(start)
}

// shardNames returns the names of the members on r's ownership ring.
func shardNames(r *Ring) []string {
	var names []string
	for _, m := range r.Owners(0, 1<<20) {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// converged reports whether every node's ring holds exactly the nodes given.
func converged(nodes []*testNode) bool {
	var want []string
	for _, n := range nodes {
		want = append(want, n.Self().Name)
	}
	slices.Sort(want)
	for _, n := range nodes {
		if !slices.Equal(shardNames(n.Ring), want) {
			return false
		}
	}
	return true
}

// onRing reports whether the member named name is on r's ownership ring.
func onRing(r *Ring, name string) bool {
	return slices.Contains(shardNames(r), name)
}

// memberNamed returns r's view of the member named name.
func memberNamed(r *Ring, name string) (Member, bool) {
	for _, m := range r.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// ownersOf returns the owner name of auction ids 1..n as r sees them.
func ownersOf(t testing.TB, r *Ring, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		m, ok := r.Owner(int64(i + 1))
		if !ok {
			t.Fatalf("no owner for auction %d", i+1)
		}
		out[i] = m.Name
	}
	return out
}
