package ring

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// offlineRing is a Ring without memberlist: tests feed it events by hand.
func offlineRing(t testing.TB, onChange func(Change)) *Ring {
	t.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Ring{
		cfg:      Config{OnChange: onChange},
		params:   defaultParams,
		name:     "self-1",
		self:     Member{Name: "self-1", ID: "self", State: StateAlive},
		log:      testLog(),
		del:      &delegate{},
		q:        newQueue(),
		metrics:  m,
		table:    make(map[string]*entry),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	r.snap.Store(&snapshot{self: r.self, own: &ownership{partitions: uint64(defaultParams.partitions)}})
	return r
}

func node(t testing.TB, name string, md meta) memberlist.Node {
	t.Helper()
	b, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: b}
}

func TestEventsMakeChanges(t *testing.T) {
	var r *Ring
	var seen []Change
	r = offlineRing(t, func(c Change) {
		// The owner table already includes the change.
		on := onRing(r, c.Member.Name)
		if c.Kind == KindJoin && c.Member.HasRole(RoleShard) && !on || c.Kind == KindLeave && on {
			t.Errorf("OnChange(%s %s): on the ring = %v", c.Kind, c.Member.Name, on)
		}
		if m, ok := memberNamed(r, c.Member.Name); !ok || m.State != c.Member.State {
			t.Errorf("OnChange(%s %s): Members() has %+v", c.Kind, c.Member.Name, m)
		}
		seen = append(seen, c)
	})
	shard := meta{ID: "a", Roles: []string{RoleShard}, Birth: 1, InternalAddr: "127.0.0.1:9001"}
	r.handle([]event{
		{kind: evJoin, node: node(t, "self-1", meta{ID: "self", Roles: []string{RoleGateway}, Birth: 1})},
		{kind: evJoin, node: node(t, "a-1", shard)},
	})
	if len(shardNames(r)) != 1 || len(r.Members()) != 2 || r.Self().Roles[0] != RoleGateway {
		t.Fatalf("after two joins: ring %v, members %v, self %+v", shardNames(r), r.Members(), r.Self())
	}

	moved := shard
	moved.InternalAddr = "127.0.0.1:9999"
	r.handle([]event{{kind: evUpdate, node: node(t, "a-1", moved)}})
	if m, _ := r.Owner(5); m.InternalAddr != "127.0.0.1:9999" {
		t.Errorf("after the update the owner is %+v", m)
	}

	crashed := meta{ID: "b", Roles: []string{RoleShard}, Birth: 1}
	r.handle([]event{{kind: evJoin, node: node(t, "b-1", crashed)}})
	r.handle([]event{{kind: evLeave, node: node(t, "b-1", crashed)}})
	r.handle([]event{{kind: evLeave, node: node(t, "b-1", crashed)}}) // a repeat is no change

	leaving := moved
	leaving.Leaving = true
	r.handle([]event{{kind: evUpdate, node: node(t, "a-1", leaving)}})
	if len(shardNames(r)) != 0 {
		t.Errorf("a leaving member is still on the ring: %v", shardNames(r))
	}
	r.handle([]event{{kind: evLeave, node: node(t, "a-1", leaving)}})

	var kinds []string
	for _, c := range seen {
		kinds = append(kinds, c.Kind+" "+c.Member.Name+" "+c.Member.State)
	}
	want := []string{
		"join self-1 alive", "join a-1 alive", "update a-1 alive",
		"join b-1 alive", "leave b-1 dead", "update a-1 alive", "leave a-1 left",
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("changes:\n got %q\nwant %q", kinds, want)
	}
	if got := testutil.ToFloat64(r.metrics.changes.WithLabelValues(KindLeave)); got != 2 {
		t.Errorf("leave counter %v, want 2", got)
	}
	if got := testutil.ToFloat64(r.metrics.alive); got != 1 {
		t.Errorf("alive gauge %v, want 1", got)
	}

	// Gone members are listed for a while, then forgotten.
	if !r.forget(time.Now().Add(2 * forgetAfter)) {
		t.Fatal("nothing forgotten")
	}
	r.publish()
	if ms := r.Members(); len(ms) != 1 || ms[0].Name != "self-1" {
		t.Errorf("after forgetting: %v", ms)
	}

	// A node that comes back under its name (a refuted death) joins again.
	r.handle([]event{{kind: evJoin, node: node(t, "b-1", crashed)}})
	if m, ok := memberNamed(r, "b-1"); !ok || m.State != StateAlive || !onRing(r, "b-1") {
		t.Errorf("b-1 back: %+v %v", m, ok)
	}
}

func TestBadMetadataOwnsNothing(t *testing.T) {
	r := offlineRing(t, nil)
	r.handle([]event{
		{kind: evJoin, node: memberlist.Node{Name: "foreign", Addr: net.IPv4(127, 0, 0, 1), Meta: []byte("not json")}},
		{kind: evJoin, node: memberlist.Node{Name: "noid", Addr: net.IPv4(127, 0, 0, 1), Meta: []byte(`{"roles":["shard"]}`)}},
	})
	if len(r.Members()) != 2 {
		t.Errorf("members %v", r.Members())
	}
	if _, ok := r.Owner(1); ok {
		t.Error("a member without usable metadata owns auctions")
	}
}

func TestPanicsAreRecovered(t *testing.T) {
	r := offlineRing(t, func(Change) { panic("boom") })
	r.handle([]event{{kind: evJoin, node: node(t, "a-1", meta{ID: "a", Roles: []string{RoleShard}})}})
	if got := testutil.ToFloat64(r.metrics.panics); got != 1 {
		t.Errorf("panics counter %v, want 1", got)
	}
	if !onRing(r, "a-1") {
		t.Error("a panicking OnChange lost the change")
	}

	// A rebuild that panics keeps the previous owner table.
	r.cfg.OnChange = nil
	r.params.load = 0.5 // consistent panics: "not enough room"
	r.handle([]event{{kind: evJoin, node: node(t, "b-1", meta{ID: "b", Roles: []string{RoleShard}})}})
	if got := testutil.ToFloat64(r.metrics.panics); got != 2 {
		t.Errorf("panics counter %v, want 2", got)
	}
	if got := shardNames(r); !slices.Equal(got, []string{"a-1"}) {
		t.Errorf("ring after a failed rebuild: %v", got)
	}
	if _, ok := memberNamed(r, "b-1"); !ok {
		t.Error("the member list was not updated")
	}
}

func TestQueueNeverBlocks(t *testing.T) {
	q := newQueue()
	ev := events{q}
	n := &memberlist.Node{Name: "x", Meta: []byte("{}")}
	for range 10_000 { // nobody consumes: memberlist must still never wait
		ev.NotifyJoin(n)
	}
	if got := len(q.take()); got != 10_000 {
		t.Errorf("took %d events", got)
	}
	ev.NotifyUpdate(n)
	n.Meta[0] = 'X' // memberlist's copy changes later: the queued one must not
	if e := q.take(); string(e[0].node.Meta) != "{}" || e[0].kind != evUpdate {
		t.Errorf("queued %+v", e)
	}
}

func TestMeta(t *testing.T) {
	md := meta{ID: "node1", InternalAddr: "10.0.0.1:9001", PublicAddr: "10.0.0.1:8080", Roles: []string{RoleShard, RoleGateway}, Birth: time.Now().UnixNano()}
	b, err := md.encode()
	if err != nil {
		t.Fatal(err)
	}
	m, leaving, err := memberOf(&memberlist.Node{Name: "node1-x", Meta: b}, StateAlive)
	if err != nil || leaving || m.ID != "node1" || m.InternalAddr != md.InternalAddr || m.PublicAddr != md.PublicAddr ||
		m.Birth != md.Birth || !m.HasRole(RoleGateway) || m.HasRole(RoleCloser) || m.Name != "node1-x" {
		t.Errorf("round trip: %+v %v %v", m, leaving, err)
	}
	md.Roles = []string{strings.Repeat("x", 600)}
	if _, err := md.encode(); err == nil {
		t.Error("600-byte metadata encoded")
	}
	d := &delegate{}
	d.setMeta(b)
	if got := d.NodeMeta(memberlist.MetaMaxSize); string(got) != string(b) {
		t.Errorf("NodeMeta = %q", got)
	}
	if got := d.NodeMeta(10); got != nil {
		t.Errorf("NodeMeta over the limit = %q", got)
	}
}

func TestSplitLevel(t *testing.T) {
	for _, tc := range []struct{ in, level, msg string }{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1", "DEBUG", "Stream connection from=127.0.0.1:1"},
		{"[ERR] memberlist: failed", "ERR", "failed"},
		{"no level", "", "no level"},
	} {
		if l, m := splitLevel([]byte(tc.in)); l != tc.level || m != tc.msg {
			t.Errorf("splitLevel(%q) = %q, %q", tc.in, l, m)
		}
	}
}

func TestIncarnationNames(t *testing.T) {
	a, b := incarnationName("node1"), incarnationName("node1")
	if a == b || !strings.HasPrefix(a, "node1-") || len(a) != len("node1-")+12 {
		t.Errorf("names %q and %q", a, b)
	}
}
