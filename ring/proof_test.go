package ring

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var (
	secretOld = []byte("the old cluster secret")
	secretNew = []byte("the new cluster secret")
)

// A join proof holds only for the name and metadata it was made for, under
// one of the verifier's secrets.
func TestJoinProof(t *testing.T) {
	md := meta{ID: "node1", InternalAddr: "10.0.0.1:9001", PublicAddr: "10.0.0.1:8080", Roles: []string{RoleShard, RoleGateway}, Birth: 42}
	proved := func(p prover, name string, md meta) meta { md.Proof = p.prove(name, md); return md }
	byNew := proved(newProver(secretNew, nil), "node1-a", md)
	edited := func(edit func(*meta)) meta { m := byNew; edit(&m); return m }
	cases := []struct {
		name   string
		verify prover
		as     string
		md     meta
		err    error
	}{
		{"right secret", newProver(secretNew, nil), "node1-a", byNew, nil},
		{"wrong secret", newProver([]byte("another cluster secret"), nil), "node1-a", byNew, errBadProof},
		{"stale secret after a rotation", newProver(secretNew, nil), "node1-a", proved(newProver(secretOld, nil), "node1-a", md), errBadProof},
		{"previous secret accepted", newProver(secretNew, secretOld), "node1-a", proved(newProver(secretOld, nil), "node1-a", md), nil},
		{"new secret accepted before it signs", newProver(secretOld, secretNew), "node1-a", byNew, nil},
		{"copied to another name", newProver(secretNew, nil), "node1-b", byNew, errBadProof},
		{"copied to another id", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.ID = "node2" }), errBadProof},
		{"internal address changed", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.InternalAddr = "10.6.6.6:9001" }), errBadProof},
		{"public address changed", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.PublicAddr = "10.6.6.6:8080" }), errBadProof},
		{"roles changed", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.Roles = []string{RoleShard} }), errBadProof},
		{"roles joined", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.Roles = []string{RoleShard + "," + RoleGateway} }), errBadProof},
		{"birth changed", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.Birth = 43 }), errBadProof},
		{"leaving flag added", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.Leaving = true }), errBadProof},
		{"no proof", newProver(secretNew, nil), "node1-a", md, errNoProof},
		{"not base64", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.Proof = "!!" }), errBadProof},
		{"too short", newProver(secretNew, nil), "node1-a", edited(func(m *meta) { m.Proof = m.Proof[:20] }), errBadProof},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.verify.check(c.as, c.md); err != c.err {
				t.Fatalf("check: %v, want %v", err, c.err)
			}
		})
	}
	if p := (prover{}).prove("node1-a", md); p != "" {
		t.Errorf("a prover without a secret proves %q", p)
	}
	// The largest metadata the flags allow still fits with its proof.
	big := meta{ID: strings.Repeat("n", maxNodeIDLen), InternalAddr: "[2001:db8::1234:5678:9abc:def0]:65535",
		PublicAddr: "[2001:db8::1234:5678:9abc:def0]:65535", Roles: []string{RoleGateway, RoleShard, RolePersister, RoleCloser, RoleRelay},
		Birth: time.Now().UnixNano(), Leaving: true}
	if _, err := proved(newProver(secretNew, nil), "x-0123456789ab", big).encode(); err != nil {
		t.Errorf("largest metadata with its proof: %v", err)
	}
}

// proofRing is an offline ring that requires join proofs under secret (and
// previous).
func proofRing(t *testing.T, secret, previous []byte, onChange func(Change)) *Ring {
	t.Helper()
	r := offlineRing(t, onChange)
	r.proofs = newProver(secret, previous)
	return r
}

// A member whose proof fails is listed as rejected, owns nothing, and is
// counted and logged once; Reject takes a proven member off the ring for
// rejectFor, then it is admitted again.
func TestRejectedMembers(t *testing.T) {
	var kinds []string
	r := proofRing(t, secretNew, nil, func(c Change) { kinds = append(kinds, c.Kind+" "+c.Member.Name+" "+c.Member.State) })
	good := meta{ID: "good", Roles: []string{RoleShard}, Birth: 1, InternalAddr: "127.0.0.1:9001"}
	good.Proof = newProver(secretNew, nil).prove("good-1", good)
	bad := meta{ID: "bad", Roles: []string{RoleShard}, Birth: 1, InternalAddr: "127.0.0.1:9002"}
	bad.Proof = newProver([]byte("a wrong cluster secret"), nil).prove("bad-1", bad)
	r.handle([]event{{kind: evJoin, node: node(t, "good-1", good)}, {kind: evJoin, node: node(t, "bad-1", bad)}})
	rejected := func(reason string) float64 { return testutil.ToFloat64(r.metrics.reject.WithLabelValues(reason)) }

	if names := shardNames(r); !slices.Equal(names, []string{"good-1"}) {
		t.Fatalf("ring %v, want the proven member alone", names)
	}
	if m, _ := memberNamed(r, "bad-1"); m.State != StateRejected || m.Verified {
		t.Fatalf("bad member listed as %+v", m)
	}
	if m, _ := memberNamed(r, "good-1"); m.State != StateAlive || !m.Verified {
		t.Fatalf("good member listed as %+v", m)
	}
	// Its updates are rejected again, but counted once.
	bad.Birth = 2
	r.handle([]event{{kind: evUpdate, node: node(t, "bad-1", bad)}})
	if got := rejected(rejectProof); got != 1 {
		t.Fatalf("proof rejections %v, want 1", got)
	}
	if got := testutil.ToFloat64(r.metrics.alive); got != 1 {
		t.Errorf("alive gauge %v, want 1 (the rejected member is not counted)", got)
	}

	// A bad answer takes a proven member off the ring at once.
	r.Reject("good-1", "its answer did not verify")
	r.Reject("good-1", "its answer did not verify")
	r.handle(r.q.take())
	if names := shardNames(r); len(names) != 0 {
		t.Fatalf("ring %v after the rejection", names)
	}
	if got := rejected(rejectAnswer); got != 1 {
		t.Fatalf("answer rejections %v, want 1", got)
	}
	// Its metadata updates do not end the rejection early.
	good.Birth = 2
	good.Proof = newProver(secretNew, nil).prove("good-1", good)
	r.handle([]event{{kind: evUpdate, node: node(t, "good-1", good)}})
	if onRing(r, "good-1") {
		t.Fatal("an update re-admitted a rejected member")
	}
	if back := r.readmit(time.Now().Add(rejectFor / 2)); len(back) != 0 {
		t.Fatalf("readmitted before rejectFor: %v", back)
	}
	r.report(r.readmit(time.Now().Add(rejectFor + time.Second)))
	r.publish()
	if !onRing(r, "good-1") || onRing(r, "bad-1") {
		t.Fatalf("after rejectFor: ring %v", shardNames(r))
	}
	// A rejected member that dies is gone like any other.
	r.handle([]event{{kind: evLeave, node: node(t, "bad-1", bad)}})
	if m, _ := memberNamed(r, "bad-1"); m.State != StateDead {
		t.Fatalf("bad member after its death: %+v", m)
	}
	want := []string{"join good-1 alive", "join bad-1 rejected", "update bad-1 rejected", "reject good-1 rejected",
		"update good-1 rejected", "update good-1 alive", "leave bad-1 dead"}
	if !slices.Equal(kinds, want) {
		t.Errorf("changes:\n got %q\nwant %q", kinds, want)
	}
}

// proofNode starts a real node with the given secrets.
func proofNode(t *testing.T, id string, seeds []string, secret, previous []byte) *testNode {
	t.Helper()
	return startNode(t, id, seeds, func(c *Config) { c.ClusterSecret, c.ClusterSecretPrevious = secret, previous })
}

// A node with the gossip key but a wrong cluster secret gossips with the
// cluster and is listed, rejected, but is never on the others' rings: it
// owns nothing there, not even for a moment.
func TestWrongSecretNeverOwns(t *testing.T) {
	t.Parallel()
	a := proofNode(t, "good1", nil, secretNew, nil)
	b := proofNode(t, "good2", []string{a.Addr()}, secretNew, nil)
	good := []*testNode{a, b}
	waitFor(t, 10*time.Second, "the good nodes to form a ring", good, func() bool { return converged(good) })

	rogue := proofNode(t, "rogue", []string{a.Addr()}, []byte("a wrong cluster secret"), nil)
	for _, n := range good {
		waitFor(t, 10*time.Second, "the rogue listed as rejected", good, func() bool {
			m, ok := memberNamed(n.Ring, rogue.Self().Name)
			return ok && m.State == StateRejected
		})
		if n.changes.has(KindJoin, rogue.Self().Name) && onRing(n.Ring, rogue.Self().Name) {
			t.Fatalf("%s has the rogue on its ring", n.Self().ID)
		}
		n.changes.mu.Lock()
		for _, c := range n.changes.changes {
			if c.Member.ID == "rogue" && c.Member.State != StateRejected {
				t.Errorf("%s saw the rogue as %s: %+v", n.Self().ID, c.Member.State, c)
			}
		}
		n.changes.mu.Unlock()
		if got := testutil.ToFloat64(n.metrics.reject.WithLabelValues(rejectProof)); got != 1 {
			t.Errorf("%s counted %v rejections, want 1", n.Self().ID, got)
		}
		if !converged(good) {
			t.Errorf("%s: ring %v", n.Self().ID, shardNames(n.Ring))
		}
	}
	// The rogue, for its part, admits nobody but itself.
	if names := shardNames(rogue.Ring); !slices.Equal(names, []string{rogue.Self().Name}) {
		t.Errorf("the rogue's ring: %v", names)
	}
}

// A rotation of the cluster secret, one node at a time through its three
// steps (accept the new secret, sign with it, drop the old), never rejects
// anyone.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	steps := []struct{ secret, previous []byte }{
		{secretOld, nil},       // before
		{secretOld, secretNew}, // 1: the new secret accepted everywhere
		{secretNew, secretOld}, // 2: signing with it
		{secretNew, nil},       // 3: the old one dropped
	}
	nodes := make([]*testNode, 3)
	for i := range nodes {
		var seeds []string
		if i > 0 {
			seeds = []string{nodes[0].Addr()}
		}
		nodes[i] = proofNode(t, fmt.Sprintf("node%d", i+1), seeds, steps[0].secret, steps[0].previous)
	}
	waitFor(t, 10*time.Second, "three nodes on every ring", nodes, func() bool { return converged(nodes) })
	for step := 1; step < len(steps); step++ {
		for i := range nodes {
			// A restart with the step's secrets, under a new incarnation,
			// seeded by a node that is up.
			seed := nodes[(i+1)%len(nodes)].Addr()
			if err := nodes[i].Leave(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			nodes[i] = proofNode(t, fmt.Sprintf("node%d", i+1), []string{seed}, steps[step].secret, steps[step].previous)
			waitFor(t, 10*time.Second, fmt.Sprintf("step %d, node%d restarted: three nodes on every ring", step, i+1), nodes,
				func() bool { return converged(nodes) })
			for _, n := range nodes {
				for _, reason := range []string{rejectProof, rejectAnswer} {
					if got := testutil.ToFloat64(n.metrics.reject.WithLabelValues(reason)); got != 0 {
						t.Fatalf("step %d: %s rejected %v members (%s)", step, n.Self().ID, got, reason)
					}
				}
			}
		}
	}
}
