package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/pgtest"
	"bidgate/ring"
	"bidgate/shard"
)

var clusterSecret = []byte("test cluster secret")

// testNode is one in-process bidgate node: ring member, shard, public and
// internal endpoints, on loopback ports.
type testNode struct {
	*testServer
	id     string
	ring   *ring.Ring
	srv    *Server
	public net.Listener
	inner  net.Listener
	reg    *prometheus.Registry
}

func startNode(t testing.TB, id string, db *pgxpool.Pool, rdb *redis.Client, seeds ...string) *testNode {
	t.Helper()
	public, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := ring.Join(ctx, ring.Config{NodeID: id, Seeds: seeds, InternalAddr: inner.Addr().String(),
		PublicAddr: public.Addr().String(), Roles: []string{"gateway", "shard"}, Log: log}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a := shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1, Log: log}, reg)
	srv := New(Config{NodeID: id, Cluster: r, ClusterSecret: clusterSecret}, a, db.Ping, reg, log)
	go func() { _ = srv.Serve(public) }()
	go func() { _ = srv.ServeInternal(inner) }()
	n := &testNode{testServer: &testServer{t: t, base: "http://" + public.Addr().String(), reg: reg},
		id: id, ring: r, srv: srv, public: public, inner: inner, reg: reg}
	t.Cleanup(n.stop)
	return n
}

// stop leaves the cluster and shuts the node down gracefully.
func (n *testNode) stop() {
	_ = n.ring.Leave(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.srv.Shutdown(ctx)
}

// kill stops the node without leaving, as a crash would: the others find
// out from failed probes.
func (n *testNode) kill() {
	_ = n.ring.Shutdown()
	n.public.Close()
	n.inner.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = n.srv.Shutdown(ctx)
}

// converge waits, bounded, until every node sees want shard members alive.
func converge(t testing.TB, want int, nodes ...*testNode) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, n := range nodes {
			alive := 0
			for _, m := range n.ring.Members() {
				if m.State == "alive" && m.HasRole("shard") {
					alive++
				}
			}
			ok = ok && alive == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not converge on %d shard members in 30s", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBidsAreServedByTheOwner(t *testing.T) {
	db, _ := pgtest.New(t, 32)
	rdb := pgtest.Redis(t)
	n1 := startNode(t, "n1", db, rdb)
	n2 := startNode(t, "n2", db, rdb, n1.ring.Addr())
	n3 := startNode(t, "n3", db, rdb, n1.ring.Addr())
	nodes := []*testNode{n1, n2, n3}
	converge(t, 3, nodes...)

	servedBy := map[string]int{}
	for i := range 30 {
		id := n1.createAuction(with(validAuction(), "hot", i%2 == 0))
		owner, ok := n1.ring.Owner(id)
		if !ok {
			t.Fatal("no owner")
		}
		for j, n := range nodes {
			r := n.bid(id, uuid.NewString(), map[string]any{"bidderId": j + 1, "amount": 1010 + 10*j})
			if r.status != 201 {
				t.Fatalf("bid through %s: %d %s", n.id, r.status, r.raw)
			}
			if got := r.header.Get(headerNode); got != owner.ID {
				t.Fatalf("auction %d: bid through %s served by %q, owner is %s", id, n.id, got, owner.ID)
			}
			servedBy[owner.ID]++
		}
		o := n2.do("GET", fmt.Sprintf("/cluster/owner/%d", id), nil)
		if o.status != 200 || o.body["owner"].(map[string]any)["id"] != owner.ID {
			t.Fatalf("GET /cluster/owner: %d %s, want %s", o.status, o.raw, owner.ID)
		}
	}
	if len(servedBy) != 3 {
		t.Fatalf("30 auctions owned by %v: want all three nodes used", servedBy)
	}
	m := n3.do("GET", "/cluster/members", nil)
	if m.status != 200 || len(m.body["members"].([]any)) != 3 {
		t.Fatalf("GET /cluster/members: %d %s", m.status, m.raw)
	}
	metrics := n1.do("GET", "/metrics", nil).raw
	if !strings.Contains(metrics, `bidgate_forwarded_total{result="ok"}`) {
		t.Fatal("n1 forwarded nothing by its metrics")
	}
}

func TestInternalEndpointNeedsTheSignature(t *testing.T) {
	db, _ := pgtest.New(t, 8)
	n := startNode(t, "solo", db, pgtest.Redis(t))
	id := n.createAuction(validAuction())
	path := fmt.Sprintf("/auctions/%d/bids", id)
	body := `{"bidderId":1,"amount":2000}`
	key := uuid.NewString()
	post := func(header ...string) response {
		inner := &testServer{t: t, base: "http://" + n.inner.Addr().String()}
		return inner.do("POST", path, body, append([]string{"Idempotency-Key", key}, header...)...)
	}
	ts := fmt.Sprint(time.Now().Unix())
	good := sign(clusterSecret, "POST", path, key, ts, []byte(body))
	cases := []struct {
		name   string
		header []string
		status int
	}{
		{"no signature", nil, 401},
		{"wrong secret", []string{headerHop, "1", headerTimestamp, ts, headerSignature, sign([]byte("other"), "POST", path, key, ts, []byte(body))}, 401},
		{"stale timestamp", []string{headerHop, "1", headerTimestamp, "1000", headerSignature, sign(clusterSecret, "POST", path, key, "1000", []byte(body))}, 401},
		{"signature of another body", []string{headerHop, "1", headerTimestamp, ts, headerSignature, sign(clusterSecret, "POST", path, key, ts, []byte(`{}`))}, 401},
		{"valid", []string{headerHop, "1", headerTimestamp, ts, headerSignature, good}, 201},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := post(c.header...); r.status != c.status {
				t.Fatalf("got %d %s, want %d", r.status, r.raw, c.status)
			}
		})
	}
}

// TestJoinAndCrashUnderLoad bids on a hot and a cold auction through every
// node while a fourth node joins and then one node crashes. Clients retry
// failed requests with the same key, as they are told to. At the end every
// 201 is in PostgreSQL, once, and the history of each auction rises.
func TestJoinAndCrashUnderLoad(t *testing.T) {
	db, _ := pgtest.New(t, 48)
	rdb := pgtest.Redis(t)
	n1 := startNode(t, "n1", db, rdb)
	n2 := startNode(t, "n2", db, rdb, n1.ring.Addr())
	n3 := startNode(t, "n3", db, rdb, n1.ring.Addr())
	converge(t, 3, n1, n2, n3)

	// The hot bids' way to PostgreSQL.
	broker, err := kafka.StartEmbedded(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	w := kafka.NewWriter(broker.Addrs(), kafka.TopicBidAccepted)
	rd := kafka.NewReader(broker.Addrs(), kafka.TopicBidAccepted, "persister")
	t.Cleanup(func() { w.Close(); rd.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	t.Cleanup(func() { cancel(); bg.Wait() })
	relay := persist.NewRelay(db, rdb, w, persist.RelayConfig{}, prometheus.NewRegistry())
	persister := persist.NewPersister(db, rdb, rd, persist.PersisterConfig{}, prometheus.NewRegistry())
	bg.Add(2)
	go func() { defer bg.Done(); _ = relay.Run(ctx) }()
	go func() { defer bg.Done(); _ = persister.Run(ctx) }()

	hot := n1.createAuction(with(validAuction(), "hot", true))
	cold := n1.createAuction(validAuction())

	var (
		mu       sync.Mutex
		nodes    = []*testNode{n1, n2, n3}
		accepted = map[string]int64{} // request id -> auction
		next     atomic.Int64
		stop     atomic.Bool
		failures atomic.Int64
		wg       sync.WaitGroup
	)
	pick := func(i int64) *testNode {
		mu.Lock()
		defer mu.Unlock()
		return nodes[i%int64(len(nodes))]
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n := next.Add(1)
				auction := hot
				if n%4 == 0 {
					auction = cold
				}
				key := uuid.NewString()
				body := fmt.Sprintf(`{"bidderId":%d,"amount":%d}`, g+1, 1010+10*n)
				for attempt := int64(0); ; attempt++ {
					status, err := postBid(client, pick(n+attempt).base, auction, key, body)
					if err == nil && (status == 201 || status == 200) {
						// 200: an earlier attempt, answered 503, got in.
						mu.Lock()
						accepted[key] = auction
						mu.Unlock()
						break
					}
					if err == nil && status == 409 {
						break
					}
					if err == nil && status != 503 {
						t.Errorf("bid answered %d: only 503 may ask for a retry", status)
						return
					}
					failures.Add(1) // 503 or a connection to a dead node: retry elsewhere
				}
			}
		}()
	}

	waitBids := func(n int64) {
		for deadline := time.Now().Add(30 * time.Second); next.Load() < n; {
			if time.Now().After(deadline) {
				t.Fatal("bids stalled")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitBids(300)
	n4 := startNode(t, "n4", db, rdb, n1.ring.Addr())
	mu.Lock()
	nodes = append(nodes, n4)
	mu.Unlock()
	converge(t, 4, n1, n2, n3, n4)
	waitBids(next.Load() + 300)

	mu.Lock()
	nodes = []*testNode{n1, n2, n4}
	mu.Unlock()
	n3.kill()
	converge(t, 3, n1, n2, n4)
	waitBids(next.Load() + 300)
	stop.Store(true)
	wg.Wait()

	// Every 201 is in PostgreSQL (hot ones via the relay and persister).
	want := map[int64]int{}
	for _, a := range accepted {
		want[a]++
	}
	for _, a := range []int64{hot, cold} {
		deadline := time.Now().Add(60 * time.Second)
		for {
			var n int
			if err := db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE auction_id = $1`, a).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == want[a] {
				break
			}
			if n > want[a] || time.Now().After(deadline) {
				t.Fatalf("auction %d: %d bids in PostgreSQL, %d accepted", a, n, want[a])
			}
			time.Sleep(20 * time.Millisecond)
		}
		rows, err := db.Query(context.Background(), `SELECT request_id::text, amount FROM bid WHERE auction_id = $1 ORDER BY seq`, a)
		if err != nil {
			t.Fatal(err)
		}
		prev := decimal.Zero
		for rows.Next() {
			var id string
			var amount decimal.Decimal
			if err := rows.Scan(&id, &amount); err != nil {
				t.Fatal(err)
			}
			if accepted[id] != a {
				t.Fatalf("bid %s in PostgreSQL was never answered 201", id)
			}
			if amount.LessThanOrEqual(prev) {
				t.Fatalf("auction %d: %s after %s", a, amount, prev)
			}
			prev = amount
		}
		rows.Close()
	}
	t.Logf("%d accepted (%d hot, %d cold), %d retried requests", len(accepted), want[hot], want[cold], failures.Load())
}

func postBid(c *http.Client, base string, auction int64, key, body string) (int, error) {
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/auctions/%d/bids", base, auction), strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
