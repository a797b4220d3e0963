package gateway

import (
	"bidgate"
	"context"
	"errors"
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

	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/ring"
	"bidgate/shard"
)

var clusterSecret = []byte("test cluster secret")

// testNode is one in-process bidgate node: ring member, shard, public and
// internal endpoints, on loopback ports.
type testNode struct {
	*testServer
	id      string
	ring    *ring.Ring
	srv     *Server
	ep      *endpoints
	public  net.Listener
	inner   net.Listener
	adminLn net.Listener
	reg     *prometheus.Registry
	changes *changes
	killed  bool
}

// changes pokes its watchers after each membership change the node's ring
// reports; the ring reports a change once its view includes it.
type changes struct {
	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
}

func (c *changes) seen(ring.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers {
		select {
		case w <- struct{}{}:
		default: // a poke is pending already
		}
	}
}

// watch pokes w (of capacity 1) after every change until stop is called.
func (c *changes) watch(w chan struct{}) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchers == nil {
		c.watchers = map[chan struct{}]struct{}{}
	}
	c.watchers[w] = struct{}{}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.watchers, w)
	}
}

func startNode(t testing.TB, id string, db *pgxpool.Pool, rdb redis.UniversalClient, seeds ...string) *testNode {
	t.Helper()
	public, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	seen := &changes{}
	r, err := ring.Join(ctx, ring.Config{NodeID: id, Seeds: seeds, InternalAddr: inner.Addr().String(),
		PublicAddr: public.Addr().String(), Roles: []string{"gateway", "shard"}, Log: log, OnChange: seen.seen,
		ClusterSecret: clusterSecret}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a := shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1, Log: log}, reg)
	srv := New(Config{NodeID: id, Cluster: r, ClusterSecret: clusterSecret, Auth: testVerifier(t)}, a, db.Ping, reg, log)
	n := &testNode{testServer: newTestServer(t, "http://"+public.Addr().String(), "http://"+admin.Addr().String(), reg),
		id: id, ring: r, srv: srv, ep: serve(srv, public, inner, admin), public: public, inner: inner, adminLn: admin, reg: reg, changes: seen}
	t.Cleanup(n.stop)
	sharing, stopSharing := context.WithCancel(context.Background())
	shared := make(chan error, 1)
	go func() { shared <- srv.ShareTokens(sharing) }()
	t.Cleanup(func() {
		stopSharing()
		if err := <-shared; err != nil {
			t.Errorf("%s: share tokens: %v", id, err)
		}
	})
	return n
}

// stop leaves the cluster and shuts the node down gracefully, unless it
// was killed.
func (n *testNode) stop() {
	if n.killed {
		return
	}
	if err := n.ring.Leave(5 * time.Second); err != nil {
		n.t.Errorf("%s: leave: %v", n.id, err)
	}
	n.ep.stop(n.t, 5*time.Second)
}

// kill stops the node without leaving, as a crash would: the others find
// out from failed probes.
func (n *testNode) kill() {
	n.t.Helper()
	n.killed = true
	if err := n.ring.Shutdown(); err != nil {
		n.t.Errorf("%s: ring shutdown: %v", n.id, err)
	}
	for _, ln := range []net.Listener{n.public, n.inner, n.adminLn} {
		if err := ln.Close(); err != nil {
			n.t.Errorf("%s: close listener: %v", n.id, err)
		}
	}
	// A crash does not wait: the listeners are gone already, and requests
	// in flight may be cut off.
	n.ep.stop(n.t, time.Second, net.ErrClosed, context.DeadlineExceeded)
}

// converge waits, bounded, until every node sees want shard members alive,
// checking after each membership change they report.
func converge(t testing.TB, want int, nodes ...*testNode) {
	t.Helper()
	changed := make(chan struct{}, 1)
	for _, n := range nodes {
		defer n.changes.watch(changed)()
	}
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for !agree(want, nodes) {
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("nodes did not converge on %d shard members in 30s", want)
		}
	}
}

// agree reports whether every node sees want shard members alive.
func agree(want int, nodes []*testNode) bool {
	for _, n := range nodes {
		alive := 0
		for _, m := range n.ring.Members() {
			if m.State == "alive" && m.HasRole("shard") {
				alive++
			}
		}
		if alive != want {
			return false
		}
	}
	return true
}

func TestBidsAreServedByTheOwner(t *testing.T) {
	db, _ := testdb.New(t, 32)
	rdb := testredis.Client(t)
	n1 := startNode(t, "n1", db, rdb)
	n2 := startNode(t, "n2", db, rdb, n1.ring.Addr())
	n3 := startNode(t, "n3", db, rdb, n1.ring.Addr())
	nodes := []*testNode{n1, n2, n3}
	converge(t, 3, nodes...)

	operator := as(t, 1, auth.ScopeOperator)
	servedBy, forwarded := map[string]int{}, 0
	for i := range 30 {
		id := n1.createAuction(with(validAuction(), "hot", i%2 == 0))
		owner, ok := n1.ring.Owner(id)
		if !ok {
			t.Fatal("no owner")
		}
		path := fmt.Sprintf("/auctions/%d/bids", id)
		for j, n := range nodes {
			// The bidder is the token's subject, on the node the bid
			// entered and, when forwarded, on the owner that decides it.
			bidder := int64(1000*(i+1) + j)
			if i == 0 {
				wantProblem(t, n.do("POST", path, map[string]any{"amount": 1010 + 10*j}, "Idempotency-Key", uuid.NewString()), 401, "unauthenticated")
				wantProblem(t, n.do("POST", path, map[string]any{"bidderId": bidder + 1, "amount": 1010 + 10*j},
					append([]string{"Idempotency-Key", uuid.NewString()}, as(t, bidder, auth.ScopeBid)...)...), 403, "subject_mismatch")
			}
			r := n.bid(bidder, id, uuid.NewString(), map[string]any{"amount": 1010 + 10*j})
			if r.status != 201 {
				t.Fatalf("bid through %s: %d %s", n.id, r.status, r.raw)
			}
			if got := r.header.Get(headerNode); got != owner.ID {
				t.Fatalf("auction %d: bid through %s served by %q, owner is %s", id, n.id, got, owner.ID)
			}
			if r.body["bidderId"] != float64(bidder) {
				t.Fatalf("auction %d: bid through %s as %d recorded for bidder %v", id, n.id, bidder, r.body["bidderId"])
			}
			if n.id != owner.ID {
				forwarded++
			}
			servedBy[owner.ID]++
		}
		// The last bid, whatever node it entered, leads under its subject.
		if g := n1.do("GET", fmt.Sprintf("/auctions/%d", id), nil, as(t, testSeller, auth.ScopeSell)...); g.body["leaderId"] != float64(1000*(i+1)+2) {
			t.Fatalf("auction %d: leader %v, want %d: %s", id, g.body["leaderId"], 1000*(i+1)+2, g.raw)
		}
		o := n2.admin().do("GET", fmt.Sprintf("/cluster/owner/%d", id), nil, operator...)
		if o.status != 200 {
			t.Fatalf("GET /cluster/owner: %d %s", o.status, o.raw)
		}
		if got, _ := o.body["owner"].(map[string]any); got["id"] != owner.ID {
			t.Fatalf("GET /cluster/owner: %s, want %s", o.raw, owner.ID)
		}
	}
	if len(servedBy) != 3 {
		t.Fatalf("30 auctions owned by %v: want all three nodes used", servedBy)
	}
	if forwarded != 60 {
		t.Fatalf("%d bids forwarded, want 60 (two of three nodes are not the owner)", forwarded)
	}
	m := n3.admin().do("GET", "/cluster/members", nil, operator...)
	if members, _ := m.body["members"].([]any); m.status != 200 || len(members) != 3 {
		t.Fatalf("GET /cluster/members: %d %s", m.status, m.raw)
	}
	metrics := n1.admin().do("GET", "/metrics", nil).raw
	if !strings.Contains(metrics, `bidgate_forwarded_total{result="ok"}`) {
		t.Fatal("n1 forwarded nothing by its metrics")
	}
}

// The internal endpoint takes no bearer token: the forwarding node
// authenticated the bidder and signed the subject into the request, so a
// subject that the signature does not cover is refused.
func TestInternalEndpointNeedsTheSignature(t *testing.T) {
	db, _ := testdb.New(t, 8)
	n := startNode(t, "solo", db, testredis.Client(t))
	id := n.createAuction(validAuction())
	path := fmt.Sprintf("/auctions/%d/bids", id)
	body := `{"amount":2000}`
	key := uuid.NewString()
	inner := internalOf(t, n)
	ts := fmt.Sprint(time.Now().Unix())
	nonces := 0
	signed := func(secret []byte, ts, subject, body string) []string {
		nonces++
		nonce := fmt.Sprintf("%032x", nonces)
		return []string{headerHop, "1", headerTimestamp, ts, headerSubject, subject, headerNonce, nonce,
			headerSignature, sign(secret, "POST", path, key, ts, nonce, subject, []byte(body))}
	}
	swapped := signed(clusterSecret, ts, "1", body)
	swapped[5] = "2" // the subject header, changed after signing
	stale := fmt.Sprint(time.Now().Add(-11 * time.Second).Unix())
	cases := []struct {
		name   string
		header []string
		body   string
		status int
		code   string
	}{
		{"no signature", []string{headerHop, "1", headerSubject, "1"}, body, 401, "bad_signature"},
		{"wrong secret", signed([]byte("other"), ts, "1", body), body, 401, "bad_signature"},
		{"stale timestamp", signed(clusterSecret, "1000", "1", body), body, 401, "bad_signature"},
		{"11 s old", signed(clusterSecret, stale, "1", body), body, 401, "bad_signature"},
		{"signature of another body", signed(clusterSecret, ts, "1", `{}`), body, 401, "bad_signature"},
		{"subject swapped after signing", swapped, body, 401, "bad_signature"},
		{"no subject", signed(clusterSecret, ts, "", body), body, 400, "bad_subject"},
		{"subject not a user id", signed(clusterSecret, ts, "01", body), body, 400, "bad_subject"},
		{"user token instead of a signature", as(t, 1, auth.ScopeBid), body, 401, "bad_signature"},
		{"body names another bidder", signed(clusterSecret, ts, "1", `{"bidderId":2,"amount":2000}`), `{"bidderId":2,"amount":2000}`, 403, "subject_mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantProblem(t, inner.do("POST", path, c.body, append([]string{"Idempotency-Key", key}, c.header...)...), c.status, c.code)
		})
	}
	// None of the above used the key; the signed subject is the bidder, and
	// the answer is signed for this request.
	valid := signed(clusterSecret, ts, "77", body)
	r := inner.do("POST", path, body, append([]string{"Idempotency-Key", key}, valid...)...)
	if r.status != 201 || r.body["bidderId"] != float64(77) {
		t.Fatalf("valid forwarded bid: %d %s, want 201 by bidder 77", r.status, r.raw)
	}
	if got, want := r.header.Get(headerAnswerSig), sign(clusterSecret, valid[9], "201", []byte(r.raw)); got != want {
		t.Fatalf("answer signature %q, want %q", got, want)
	}
	// The same signed request again, within the window: refused, once only.
	wantProblem(t, inner.do("POST", path, body, append([]string{"Idempotency-Key", key}, valid...)...), 401, "bad_signature")
}

// The cluster routes are operators' (API5, function-level authorization).
func TestClusterRoutesNeedTheOperatorScope(t *testing.T) {
	db, _ := testdb.New(t, 4)
	n := startNode(t, "solo", db, testredis.Client(t)).admin()
	for _, path := range []string{"/cluster/members", "/cluster/owner/1"} {
		t.Run(path, func(t *testing.T) {
			r := n.do("GET", path, nil)
			wantProblem(t, r, 401, "unauthenticated")
			if h := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") || strings.Contains(h, "error=") {
				t.Fatalf("no token: WWW-Authenticate %q, want a Bearer challenge without error", h)
			}
			wantProblem(t, n.do("GET", path, nil, "Authorization", "Bearer garbage"), 401, "unauthenticated")
			wantProblem(t, n.do("GET", path, nil, as(t, 1, auth.ScopeBid, auth.ScopeSell)...), 403, "forbidden")
			if r := n.do("GET", path, nil, as(t, 1, auth.ScopeOperator)...); r.status != 200 {
				t.Fatalf("operator: %d %s", r.status, r.raw)
			}
		})
	}
}

// TestJoinAndCrashUnderLoad bids on a hot and a cold auction through every
// node while a fourth node joins and then one node crashes. Clients retry
// failed requests with the same key, as they are told to. At the end every
// 201 is in PostgreSQL, once, and the history of each auction rises.
func TestJoinAndCrashUnderLoad(t *testing.T) {
	db, _ := testdb.New(t, 48)
	rdb := testredis.Client(t)
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
	w := kafka.NewWriter(broker.Addrs(), bidgate.TopicBidAccepted, kafka.Security{})
	rd := kafka.NewReader(broker.Addrs(), bidgate.TopicBidAccepted, "persister", kafka.Security{})
	t.Cleanup(func() {
		if err := errors.Join(w.Close(), rd.Close()); err != nil {
			t.Errorf("close the Kafka clients: %v", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	t.Cleanup(func() { cancel(); bg.Wait() })
	relay := persist.NewRelay(db, rdb, w, persist.RelayConfig{}, prometheus.NewRegistry())
	persister := persist.NewPersister(db, rdb, rd, persist.PersisterConfig{}, prometheus.NewRegistry())
	for name, run := range map[string]func(context.Context) error{"relay": relay.Run, "persister": persister.Run} {
		bg.Go(func() {
			if err := run(ctx); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}

	hot := n1.createAuction(with(validAuction(), "hot", true))
	cold := n1.createAuction(validAuction())

	var (
		mu       sync.Mutex
		nodes    = []*testNode{n1, n2, n3}
		accepted = map[string]int64{} // request id -> auction
		next     atomic.Int64
		started  = make(chan struct{}, 1) // poked as each bid starts
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
		tok := token(t, int64(g+1), auth.ScopeBid) // minted here: t.Fatal only on the test's goroutine
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				n := next.Add(1)
				select {
				case started <- struct{}{}:
				default: // a poke is pending already
				}
				auction := hot
				if n%4 == 0 {
					auction = cold
				}
				key := uuid.NewString()
				body := fmt.Sprintf(`{"amount":%d}`, 1010+10*n)
				for attempt := int64(0); ; attempt++ {
					status, err := postBid(client, pick(n+attempt).base, auction, key, tok, body)
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
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		for next.Load() < n {
			select {
			case <-started:
			case <-timer.C:
				t.Fatal("bids stalled")
			}
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
		// The persister says nothing when it wrote: count until it has.
		eventually(t, 60*time.Second, fmt.Sprintf("auction %d: every accepted bid in PostgreSQL", a), func() error {
			var n int
			if err := db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE auction_id = $1`, a).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > want[a] {
				t.Fatalf("auction %d: %d bids in PostgreSQL, %d accepted", a, n, want[a])
			}
			if n < want[a] {
				return fmt.Errorf("%d bids in PostgreSQL, %d accepted", n, want[a])
			}
			return nil
		})
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

func postBid(c *http.Client, base string, auction int64, key, token, body string) (int, error) {
	req, err := http.NewRequest("POST", fmt.Sprintf("%s/auctions/%d/bids", base, auction), strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}
