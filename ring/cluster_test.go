package ring

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const ids = 10_000

func TestThreeNodesAgreeOnOwners(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)

	want := ownersOf(t, nodes[0].Ring, ids)
	for _, n := range nodes[1:] {
		if got := ownersOf(t, n.Ring, ids); !slices.Equal(got, want) {
			t.Fatalf("%s disagrees with %s on owners", n.Self().ID, nodes[0].Self().ID)
		}
	}
	owned := map[string]int{}
	for _, name := range want {
		owned[name]++
	}
	for _, n := range nodes {
		if owned[n.Self().Name] == 0 {
			t.Errorf("%s owns nothing: %v", n.Self().ID, owned)
		}
	}
	t.Logf("ids owned per node: %v", owned)

	for id := int64(1); id <= 1000; id++ {
		owner, _ := nodes[1].Owner(id)
		all := nodes[2].Owners(id, 5)
		if len(all) != 3 || all[0].Name != owner.Name || all[0].Name == all[1].Name || all[1].Name == all[2].Name || all[0].Name == all[2].Name {
			t.Fatalf("Owners(%d, 5) = %v, owner %s", id, names(all), owner.Name)
		}
	}

	for _, n := range nodes {
		if got := testutil.ToFloat64(n.metrics.alive); got != 3 {
			t.Errorf("%s: alive members gauge = %v, want 3", n.Self().ID, got)
		}
		if got := testutil.ToFloat64(n.metrics.shards); got != 3 {
			t.Errorf("%s: shard members gauge = %v, want 3", n.Self().ID, got)
		}
		if got := testutil.ToFloat64(n.metrics.changes.WithLabelValues(KindJoin)); got < 3 {
			t.Errorf("%s: join changes = %v, want >= 3", n.Self().ID, got)
		}
		// The ring's five metrics, and nothing else, are on its registry.
		ours := 0
		for _, name := range []string{"bidgate_ring_alive_members", "bidgate_ring_shard_members",
			"bidgate_ring_changes_total", "bidgate_ring_panics_total", "bidgate_ring_rejected_members_total"} {
			c, err := testutil.GatherAndCount(n.reg, name)
			if err != nil || c == 0 {
				t.Errorf("%s: %d series of %s (%v)", n.Self().ID, c, name, err)
			}
			ours += c
		}
		if all, err := testutil.GatherAndCount(n.reg); err != nil || all != ours {
			t.Errorf("%s: %d series registered, %d of them the ring's (%v)", n.Self().ID, all, ours, err)
		}
	}
}

func TestFourthNodeMovesAQuarter(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	before := ownersOf(t, nodes[0].Ring, ids)

	start := time.Now()
	fourth := startNode(t, "node4", []string{nodes[1].Addr()}, nil)
	joined := time.Since(start)
	nodes = append(nodes, fourth)
	seen := waitFor(t, 10*time.Second, "4 nodes to see 4 shards", nodes, func() bool { return converged(nodes) })
	t.Logf("join seen by every node %v after Join returned (Join took %v)", seen, joined)

	after := ownersOf(t, nodes[0].Ring, ids)
	moved, toNew := 0, 0
	for i := range after {
		if after[i] != before[i] {
			moved++
			if after[i] == fourth.Self().Name {
				toNew++
			}
		}
	}
	frac := float64(moved) / ids
	t.Logf("adding a 4th node moved %d of %d ids (%.1f%%), %d of them to the new node", moved, ids, 100*frac, toNew)
	if frac < 0.10 || frac > 0.40 {
		t.Errorf("moved fraction %.3f, want between 0.10 and 0.40", frac)
	}
	for _, n := range nodes[1:] {
		if !slices.Equal(ownersOf(t, n.Ring, ids), after) {
			t.Errorf("%s disagrees on owners after the join", n.Self().ID)
		}
	}
}

func TestLeaveIsSeenQuickly(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leaver := nodes[2]
	name := leaver.Self().Name
	stayers := nodes[:2]

	start := time.Now()
	left := make(chan time.Duration)
	go func() {
		if err := leaver.Leave(5 * time.Second); err != nil {
			t.Errorf("Leave: %v", err)
		}
		left <- time.Since(start)
	}()
	seen := waitFor(t, 5*time.Second, "the others to drop the leaver", stayers, func() bool {
		return !onRing(stayers[0].Ring, name) && !onRing(stayers[1].Ring, name)
	})
	took := <-left
	waitFor(t, 5*time.Second, "OnChange(leave) on the others", stayers, func() bool {
		return stayers[0].changes.has(KindLeave, name) && stayers[1].changes.has(KindLeave, name)
	})
	t.Logf("the others dropped the leaver %v after Leave was called; Leave returned after %v", seen, took)

	for _, s := range stayers {
		m, ok := memberNamed(s.Ring, name)
		if !ok || m.State != StateLeft {
			t.Errorf("%s sees the leaver as %+v (listed: %v), want state left", s.Self().ID, m, ok)
		}
	}
	if !slices.Equal(ownersOf(t, stayers[0].Ring, ids), ownersOf(t, stayers[1].Ring, ids)) {
		t.Error("the survivors disagree on owners")
	}
	if err := leaver.Leave(time.Second); err == nil {
		t.Error("a second Leave returned no error")
	}
	if err := leaver.Shutdown(); err != nil {
		t.Errorf("Shutdown after Leave: %v", err)
	}
}

func TestCrashedNodeIsDropped(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	crashed := nodes[2]
	name := crashed.Self().Name
	survivors := nodes[:2]

	var had []int64
	for id := int64(1); id <= ids; id++ {
		if m, _ := survivors[0].Owner(id); m.Name == name {
			had = append(had, id)
		}
	}

	if err := crashed.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// OnChange follows the owner table's publication (events.go): both
	// are awaited, as a reader could see the first before the second.
	seen := waitFor(t, 20*time.Second, "the survivors to drop the crashed node", survivors, func() bool {
		return !onRing(survivors[0].Ring, name) && !onRing(survivors[1].Ring, name) &&
			survivors[0].changes.has(KindLeave, name) && survivors[1].changes.has(KindLeave, name)
	})
	t.Logf("crash seen by both survivors after %v; it owned %d of %d ids", seen, len(had), ids)

	for _, s := range survivors {
		m, ok := memberNamed(s.Ring, name)
		if !ok || m.State != StateDead {
			t.Errorf("%s sees the crashed node as %+v (listed: %v), want state dead", s.Self().ID, m, ok)
		}
	}
	for _, id := range had {
		a, _ := survivors[0].Owner(id)
		b, _ := survivors[1].Owner(id)
		if a.Name != b.Name || a.Name == name || (a.Name != survivors[0].Self().Name && a.Name != survivors[1].Self().Name) {
			t.Fatalf("auction %d: owners %s and %s after the crash", id, a.Name, b.Name)
		}
	}
}

func TestMemberWithoutShardRoleOwnsNothing(t *testing.T) {
	t.Parallel()
	a := startNode(t, "node1", nil, nil)
	b := startNode(t, "node2", []string{a.Addr()}, nil)
	gw := startNode(t, "gw1", []string{a.Addr()}, func(c *Config) { c.Roles = []string{RoleGateway} })
	all := []*testNode{a, b, gw}
	waitFor(t, 10*time.Second, "everyone to list 3 members", all, func() bool {
		for _, n := range all {
			if alive(n.Members()) != 3 {
				return false
			}
		}
		return true
	})
	shards := []*testNode{a, b}
	waitFor(t, 10*time.Second, "everyone to see 2 shards", all, func() bool {
		for _, n := range all {
			if !slices.Equal(shardNames(n.Ring), shardNames(a.Ring)) || len(shardNames(n.Ring)) != 2 {
				return false
			}
		}
		return converged(shards)
	})

	for _, n := range all {
		m, ok := memberNamed(n.Ring, gw.Self().Name)
		if !ok || !m.HasRole(RoleGateway) || m.HasRole(RoleShard) || m.ID != "gw1" || m.State != StateAlive {
			t.Errorf("%s lists the gateway as %+v (%v)", n.Self().ID, m, ok)
		}
		for id := int64(1); id <= ids; id++ {
			if o, _ := n.Owner(id); o.Name == gw.Self().Name {
				t.Fatalf("%s: the gateway owns auction %d", n.Self().ID, id)
			}
		}
		if got := n.Owners(7, 3); len(got) != 2 {
			t.Errorf("%s: Owners(7, 3) = %v, want the 2 shards", n.Self().ID, names(got))
		}
	}
	if _, ok := gw.Owner(1); !ok {
		t.Error("the gateway node knows no owner")
	}
	if got := testutil.ToFloat64(gw.metrics.alive); got != 3 {
		t.Errorf("alive gauge %v, want 3", got)
	}
	if got := testutil.ToFloat64(gw.metrics.shards); got != 2 {
		t.Errorf("shard gauge %v, want 2", got)
	}
}

func TestSelf(t *testing.T) {
	t.Parallel()
	n := startNode(t, "node1", nil, func(c *Config) { c.Roles = []string{RoleShard, RoleGateway} })
	self := n.Self()
	if self.ID != "node1" || !strings.HasPrefix(self.Name, "node1-") || self.State != StateAlive ||
		self.InternalAddr != "127.0.0.1:9001" || self.PublicAddr != "127.0.0.1:8001" || self.Birth == 0 ||
		!self.HasRole(RoleGateway) || !self.HasRole(RoleShard) {
		t.Errorf("Self() = %+v", self)
	}
	if o, ok := n.Owner(42); !ok || o.Name != self.Name {
		t.Errorf("alone, Owner = %+v, %v; want itself", o, ok)
	}
	if _, _, err := net.SplitHostPort(n.Addr()); err != nil || !strings.HasPrefix(n.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q", n.Addr())
	}
	// A restart under the same id is a new name: both can be alive at once.
	again := startNode(t, "node1", []string{n.Addr()}, nil)
	if again.Self().Name == self.Name {
		t.Fatal("two incarnations got the same name")
	}
	waitFor(t, 10*time.Second, "the younger incarnation to own everything", []*testNode{n, again}, func() bool {
		a, _ := n.Owner(1)
		b, _ := again.Owner(1)
		return a.Name == again.Self().Name && b.Name == again.Self().Name && len(shardNames(n.Ring)) == 1
	})
}

func TestLeaveWithoutTime(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 2)
	// Too short to broadcast: memberlist must not wait for ever. The bound
	// only catches a hang; it says nothing about speed.
	left := make(chan error, 1)
	go func() { left <- nodes[1].Leave(0) }()
	select {
	case err := <-left:
		t.Logf("Leave(0): %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Leave(0) still waiting after 30s")
	}
	alone := startNode(t, "alone", nil, nil)
	if err := alone.Leave(0); err != nil {
		t.Errorf("Leave(0) with nobody to tell: %v", err)
	}
}

func TestJoinRejectsBadConfig(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("r", 520)
	nearly := func(c *Config) {
		// Fits in 512 bytes without the leaving flag, not with it.
		c.Roles = nil
		base, _ := meta{ID: c.NodeID, Birth: time.Now().UnixNano()}.encode()
		c.Roles = []string{strings.Repeat("x", 512-len(base)-len(`,"roles":[""]`))}
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "NodeID is required"},
		{"node id with a space", func(c *Config) { c.NodeID = "node 1" }, "NodeID"},
		{"load 1.0", func(c *Config) { c.Load = 1.0 }, "Load"},
		{"load below 1", func(c *Config) { c.Load = 0.8 }, "Load"},
		{"load negative", func(c *Config) { c.Load = -2 }, "Load"},
		{"load NaN", func(c *Config) { c.Load = math.NaN() }, "Load"},
		{"negative partitions", func(c *Config) { c.PartitionCount = -1 }, "PartitionCount"},
		{"too many partitions", func(c *Config) { c.PartitionCount = maxPartitions + 1 }, "PartitionCount"},
		{"negative replication", func(c *Config) { c.ReplicationFactor = -5 }, "ReplicationFactor"},
		{"metadata over 512 bytes", func(c *Config) { c.Roles = []string{long} }, "512"},
		{"metadata over 512 bytes when leaving", nearly, "512"},
		{"secret key of 7 bytes", func(c *Config) { c.SecretKey = []byte("1234567") }, "SecretKey"},
		{"secret key of 33 bytes", func(c *Config) { c.SecretKey = make([]byte, 33) }, "SecretKey"},
		{"bind addr not an IP", func(c *Config) { c.BindAddr = "localhost" }, "BindAddr"},
		{"bind port out of range", func(c *Config) { c.BindPort = 70000 }, "BindPort"},
		{"internal addr without port", func(c *Config) { c.InternalAddr = "10.0.0.1" }, "InternalAddr"},
		{"empty role", func(c *Config) { c.Roles = []string{""} }, "role"},
		{"empty seed", func(c *Config) { c.Seeds = []string{""} }, "Seeds"},
		{"unspecified IPv6 bind without advertise", func(c *Config) { c.BindAddr = "::" }, "AdvertiseAddr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{NodeID: "node1", Roles: []string{RoleShard}, Log: testLog()}
			tc.edit(&cfg)
			var r *Ring
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("Join panicked: %v", v)
					}
				}()
				r, err = Join(context.Background(), cfg, prometheus.NewRegistry())
			}()
			if err == nil {
				if err := r.Shutdown(); err != nil {
					t.Error(err)
				}
				t.Fatal("Join accepted the config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestJoinFailsWhenNoSeedAnswers(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seed := l.Addr().String()
	if err := l.Close(); err != nil { // nobody listens there now
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	reg := prometheus.NewRegistry()
	start := time.Now()
	r, err := Join(ctx, Config{NodeID: "lonely", Seeds: []string{seed}, Roles: []string{RoleShard}, Log: testLog(), tune: clusterLabel(t)}, reg)
	took := time.Since(start)
	if err == nil {
		if err := r.Shutdown(); err != nil {
			t.Error(err)
		}
		t.Fatal("Join succeeded without a seed")
	}
	if !strings.Contains(err.Error(), seed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q should name the seed and wrap the deadline", err)
	}
	if deadline, _ := ctx.Deadline(); time.Now().Before(deadline) {
		t.Errorf("Join gave up after %v, before its deadline", took)
	}
	t.Logf("Join gave up after %v: %v", took, err)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("a failed Join left %d metric series registered (%v)", n, err)
	}
}

func TestSecondRingOnOneRegistry(t *testing.T) {
	t.Parallel()
	a := startNode(t, "node1", nil, nil)
	_, err := Join(context.Background(), Config{NodeID: "node2", Log: testLog(), tune: clusterLabel(t)}, a.reg)
	if err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("Join on a used registry: %v", err)
	}
	// Once a stops, its metrics are gone and another Ring may register.
	if err := a.Shutdown(); err != nil {
		t.Fatal(err)
	}
	c, err := Join(context.Background(), Config{NodeID: "node3", Log: testLog(), tune: clusterLabel(t)}, a.reg)
	if err != nil {
		t.Fatalf("Join on the registry of a stopped ring: %v", err)
	}
	if err := c.Shutdown(); err != nil {
		t.Error(err)
	}
}

func TestGossipEncryption(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	withKey := func(k []byte) func(*Config) { return func(c *Config) { c.SecretKey = k } }
	a := startNode(t, "node1", nil, withKey(key))
	b := startNode(t, "node2", []string{a.Addr()}, withKey(key))
	pair := []*testNode{a, b}
	waitFor(t, 10*time.Second, "the two keyed nodes to form a cluster", pair, func() bool { return converged(pair) })

	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"other key", []byte("fedcba9876543210")},
		{"no key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "intruder-" + strings.ReplaceAll(tc.name, " ", "-")
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			// The same label as a and b, so that only the key keeps it out.
			cfg := Config{NodeID: id, Seeds: []string{a.Addr()}, SecretKey: tc.key, Roles: []string{RoleShard}, Log: testLog(), tune: a.cfg.tune}
			r, err := Join(ctx, cfg, prometheus.NewRegistry())
			if err == nil {
				t.Cleanup(func() {
					if err := r.Shutdown(); err != nil {
						t.Error(err)
					}
				})
				t.Errorf("Join with %s succeeded", tc.name)
			} else {
				t.Logf("Join with %s failed as it should: %v", tc.name, err)
			}
			// A negative: for another second no change a or b sees, since
			// they started, may be about the intruder.
			changed, stop := watchChanges(pair)
			defer stop()
			window := time.NewTimer(time.Second)
			defer window.Stop()
			for over := false; ; {
				for _, n := range pair {
					if n.changes.hasID(id) || slices.ContainsFunc(n.Members(), func(m Member) bool { return m.ID == id }) {
						t.Fatalf("%s lists the node with %s", n.Self().ID, tc.name)
					}
				}
				if over {
					break
				}
				select {
				case <-changed:
				case <-window.C:
					over = true
				}
			}
		})
	}
}

// TestOwnerWhileMembershipChanges reads the ring from many goroutines while
// nodes join and leave; run it with -race.
func TestOwnerWhileMembershipChanges(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	var (
		stop  atomic.Bool
		reads atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		pool  = slices.Clone(nodes)
	)
	pick := func() *testNode {
		mu.Lock()
		defer mu.Unlock()
		return pool[rand.IntN(len(pool))]
	}
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				runtime.Gosched() // on a 2-CPU machine under -race, leave memberlist some CPU
				n := pick()
				id := rand.Int64N(1 << 40)
				if m, ok := n.Owner(id); ok && (m.Name == "" || !m.HasRole(RoleShard)) {
					t.Errorf("Owner(%d) = %+v", id, m)
					return
				}
				if two := n.Owners(id, 2); len(two) == 2 && two[0].Name == two[1].Name {
					t.Errorf("Owners(%d, 2) repeats %s", id, two[0].Name)
					return
				}
				_ = n.Members()
				_ = n.Self()
				reads.Add(1)
			}
		})
	}

	var joined []*testNode
	for i := 4; i <= 6; i++ {
		n := startNode(t, fmt.Sprintf("node%d", i), []string{nodes[0].Addr()}, nil)
		joined = append(joined, n)
		mu.Lock()
		pool = append(pool, n)
		mu.Unlock()
	}
	all := append(slices.Clone(nodes), joined...)
	waitFor(t, 20*time.Second, "6 nodes to converge", all, func() bool { return converged(all) })
	for _, n := range []*testNode{nodes[1], joined[0]} {
		if err := n.Leave(5 * time.Second); err != nil {
			t.Errorf("Leave: %v", err)
		}
	}
	rest := []*testNode{nodes[0], nodes[2], joined[1], joined[2]}
	waitFor(t, 20*time.Second, "4 nodes to converge after two left", rest, func() bool { return converged(rest) })
	stop.Store(true)
	wg.Wait()
	t.Logf("%d concurrent reads during 3 joins and 2 leaves", reads.Load())
}

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func alive(ms []Member) int {
	n := 0
	for _, m := range ms {
		if m.State == StateAlive {
			n++
		}
	}
	return n
}
