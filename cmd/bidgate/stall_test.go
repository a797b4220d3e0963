package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/gateway"
	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testport"
	"bidgate/internal/testredis"
)

// answer is what timedCall heard, and how long it took.
type answer struct {
	status     int
	code       string // the problem code of an error answer
	retryAfter string
	node       string // X-Bidgate-Node
	seq        int64  // of a bid answer
	took       time.Duration
}

// timedCall sends body as JSON with header's name, value pairs and times
// the answer; a client-side timeout well past every server budget fails
// the test.
func timedCall(t *testing.T, method, url string, body any, header ...string) answer {
	t.Helper()
	var (
		r    io.Reader
		sent []byte
	)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r, sent = bytes.NewReader(b), b
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	checkContract(t, req, sent, resp, raw)
	var doc struct {
		Code string `json:"code"`
		Seq  int64  `json:"seq"`
	}
	_ = json.Unmarshal(raw, &doc) // an answer that is no JSON object has neither
	return answer{status: resp.StatusCode, code: doc.Code, retryAfter: resp.Header.Get("Retry-After"),
		node: resp.Header.Get("X-Bidgate-Node"), seq: doc.Seq, took: took}
}

// bidOn places a bid of amount as bidder on auction at base.
func bidOn(t *testing.T, base string, key *auth.SigningKey, auction, bidder int64, amount, idemKey string) answer {
	t.Helper()
	return timedCall(t, "POST", fmt.Sprintf("%s/auctions/%d/bids", base, auction), map[string]any{"amount": amount},
		append([]string{"Idempotency-Key", idemKey}, bearer(t, key, bidder, auth.ScopeBid)...)...)
}

// createAuction creates an auction (hot or cold) sold by user 1 at base.
func createAuction(t *testing.T, base string, key *auth.SigningKey, hot bool) int64 {
	t.Helper()
	status, body := call(t, "POST", base+"/auctions", map[string]any{"title": "stalled store",
		"startPrice": "10.00", "minIncrement": "1.00", "endTime": time.Now().Add(time.Hour).Format(time.RFC3339), "hot": hot},
		bearer(t, key, 1, auth.ScopeSell)...)
	if status != 201 {
		t.Fatalf("create auction: %d %v", status, body)
	}
	return int64(body["id"].(float64))
}

// With its Redis frozen (SIGSTOP), a node answers a hot bid 503
// store_timeout with Retry-After well before the request's budget, and
// /readyz 503 within its own; once Redis wakes, the same key tells the
// bid's outcome.
func TestStalledRedisAnswersWithinTheBudget(t *testing.T) {
	rdb, redisPID := testredis.Server(t)
	redisAddr := rdb.Options().Addr
	_, dbURL := testdb.New(t, 2)
	keyPath, key := devKey(t)
	args, base := serveArgs(t, dbURL, keyPath, "--redis-addrs", redisAddr, "--rate-limit", "-1")
	startProcess(t, args...).await(t, "bidgate serving", 60*time.Second)

	auction := createAuction(t, base, key, true)
	if a := bidOn(t, base, key, auction, 2, "11.00", uuid.NewString()); a.status != 201 {
		t.Fatalf("a hot bid before the stall: %+v", a)
	}

	if err := syscall.Kill(redisPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(redisPID, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)

	budget := gateway.DefaultConfig().RequestTimeout
	idemKey := uuid.NewString()
	a := bidOn(t, base, key, auction, 3, "12.00", idemKey)
	t.Logf("hot bid with Redis stopped: %d %s after %v", a.status, a.code, a.took)
	if a.status != 503 || a.code != "store_timeout" || a.retryAfter == "" {
		t.Errorf("a hot bid with Redis stopped: %+v; want 503 store_timeout with Retry-After", a)
	}
	if a.took >= budget {
		t.Errorf("a hot bid with Redis stopped was answered after %v; want before the request budget, %v", a.took, budget)
	}
	ready := timedCall(t, "GET", base+"/readyz", nil)
	t.Logf("/readyz with Redis stopped: %d after %v", ready.status, ready.took)
	if ready.status != 503 || ready.took >= 2*time.Second {
		t.Errorf("/readyz with Redis stopped: %d after %v; want 503 within its 2s budget", ready.status, ready.took)
	}

	resume()
	again := bidOn(t, base, key, auction, 3, "12.00", idemKey)
	if again.status != 200 && again.status != 201 {
		t.Fatalf("the same key once Redis is back: %+v; want the bid's outcome", again)
	}
	if replay := bidOn(t, base, key, auction, 3, "12.00", idemKey); replay.status != 200 || replay.seq != again.seq {
		t.Fatalf("the same key a third time: %+v; want the replay of %+v", replay, again)
	}
}

// With the row of a cold auction locked in PostgreSQL, a bid sent to
// either node of a cluster (the owner, or the one that forwards to it) is
// answered 503 store_timeout before the forwarder's budget ends: the
// forwarding node hears the owner's answer. Neither bid is placed when the
// lock goes, and their keys then decide afresh.
func TestLockedRowAnswersWithinTheForwardBudget(t *testing.T) {
	db, dbURL := testdb.New(t, 2)
	keyPath, key := devKey(t)
	gossip := testport.Free(t)
	args, baseA := serveArgs(t, dbURL, keyPath, "--node-id", "a", "--gossip-port", strconv.Itoa(gossip),
		"--rate-limit", "-1", "--promote-rate", "-1")
	nodeA := startProcess(t, args...)
	admin := "http://" + logValue(t, nodeA.await(t, "bidgate serving", 60*time.Second), "admin")
	args, baseB := serveArgs(t, dbURL, keyPath, "--node-id", "b", "--seeds", testport.Loopback(gossip),
		"--rate-limit", "-1", "--promote-rate", "-1")
	startProcess(t, args...).await(t, "bidgate serving", 60*time.Second)
	operator := bearer(t, key, 1, auth.ScopeOperator)
	eventually(t, 30*time.Second, "both nodes in the ring", func() error {
		_, members := call(t, "GET", admin+"/cluster/members", nil, operator...)
		if list, _ := members["members"].([]any); len(list) != 2 {
			return fmt.Errorf("members: %v", members)
		}
		return nil
	})

	auction := createAuction(t, baseA, key, false)
	lock, err := db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(t.Context())
	if _, err := lock.Exec(t.Context(), "SELECT id FROM auction WHERE id = $1 FOR UPDATE", auction); err != nil {
		t.Fatal(err)
	}

	budget := gateway.DefaultConfig().ForwardTimeout
	bids := []struct {
		base, amount, key string
		bidder            int64
	}{
		{base: baseA, amount: "20.00", key: uuid.NewString(), bidder: 2},
		{base: baseB, amount: "30.00", key: uuid.NewString(), bidder: 3},
	}
	for _, b := range bids {
		a := bidOn(t, b.base, key, auction, b.bidder, b.amount, b.key)
		t.Logf("cold bid on a locked row via %s: %d %s from node %q after %v", b.base, a.status, a.code, a.node, a.took)
		if a.status != 503 || a.code != "store_timeout" || a.retryAfter == "" || a.took >= budget {
			t.Errorf("a cold bid on a locked row via %s: %+v; want 503 store_timeout with Retry-After within %v", b.base, a, budget)
		}
	}

	if err := lock.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Once no other session runs a statement, one whose client gave up has
	// committed, if it was going to.
	eventually(t, 10*time.Second, "no statement running", func() error {
		var n int
		if err := db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND state NOT IN ('idle', 'idle in transaction')`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d statements running", n)
		}
		return nil
	})
	var placed []string
	rows, err := db.Query(t.Context(), "SELECT request_id::text FROM bid WHERE auction_id = $1", auction)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		placed = append(placed, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(placed) != 0 {
		t.Fatalf("bids answered 503 were placed once the lock went: %s", strings.Join(placed, ", "))
	}
	for _, b := range bids {
		if a := bidOn(t, b.base, key, auction, b.bidder, b.amount, b.key); a.status != 201 {
			t.Fatalf("the same key via %s after the lock: %+v; want the bid placed afresh", b.base, a)
		}
	}
}
