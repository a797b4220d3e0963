package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	kafkago "github.com/segmentio/kafka-go"

	"bidgate"
	"bidgate/gateway/openapi"
	"bidgate/internal/apiclient"
	"bidgate/internal/apitest"
	"bidgate/internal/asyncapi"
	"bidgate/internal/auth"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testenv"
	"bidgate/internal/testport"
)

// eventually polls cond until it returns nil, failing the test after limit
// with cond's last answer. It is for what announces no event (a server
// coming up, a pipeline's writes to PostgreSQL); anything else is awaited.
func eventually(t *testing.T, limit time.Duration, what string, cond func() error) {
	t.Helper()
	await.NoError(t, limit, what, cond)
}

// healthy says why url does not answer 200, or nil.
func healthy(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if err = errors.Join(err, resp.Body.Close()); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// devKey creates, in a directory of the test's own, the signing key that a
// node started with --dev-key on the returned path trusts.
func devKey(t *testing.T) (string, *auth.SigningKey) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dev-key.pem")
	key, created, err := auth.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Fatalf("%s existed before the test", path)
	}
	return path, key
}

// bearer is the Authorization header of a dev token of user with scopes,
// valid for an hour.
func bearer(t *testing.T, key *auth.SigningKey, user int64, scopes ...string) []string {
	t.Helper()
	tok, err := key.Mint(auth.Token{Subject: user, Scopes: scopes, Issuer: auth.DevIssuer, Audience: auth.DevAudience,
		Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return []string{"Authorization", "Bearer " + tok}
}

// startBidgate runs the whole binary (every role, embedded Kafka) on a test
// database until the test ends, and returns its base URL, its Kafka address
// and the dev key it trusts tokens of.
func startBidgate(t *testing.T) (base, broker string, db *pgxpool.Pool, key *auth.SigningKey) {
	t.Helper()
	db, dbURL := testdb.New(t, 4)
	keyPath, key := devKey(t)
	cfg, err := parseConfig("serve", append([]string{"--dev-key", keyPath}, clusterArgs...))
	if err != nil {
		t.Fatal(err)
	}
	httpPort, kafkaPort := testport.Free(t), testport.Free(t)
	cfg.HTTP.Listen = fmt.Sprintf("127.0.0.1:%d", httpPort)
	cfg.HTTP.InternalListen = testport.Addr(t)
	cfg.HTTP.AdminListen = "127.0.0.1:0"
	cfg.Postgres.MaxConns = 8
	cfg.Cluster.GossipPort = testport.Free(t)
	cfg.Postgres.URL = dbURL
	cfg.Kafka.EmbeddedPort = kafkaPort
	cfg.Shard.RateLimit = -1 // thousands of bids from few bidders
	cfg.Log.Level = "warn"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base = "http://" + cfg.HTTP.Listen
	// serve binds its port only once it has joined; it says so in a log
	// line on os.Stderr, which a test in this process cannot read.
	eventually(t, 30*time.Second, "bidgate ready", func() error { return healthy(http.DefaultClient, base+"/readyz") })
	return base, fmt.Sprintf("127.0.0.1:%d", kafkaPort), db, key
}

// contracts are the OpenAPI documents of the public and the admin listener,
// as the binary serves them.
var contracts = sync.OnceValues(func() (apitest.Contracts, error) {
	public, err := apitest.New(openapi.Public())
	if err != nil {
		return nil, err
	}
	admin, err := apitest.New(openapi.Admin())
	return apitest.Contracts{public, admin}, err
})

// checkContract fails the test (t.Errorf: goroutines may call it) when the
// answer to req is not what the OpenAPI documents describe.
func checkContract(t *testing.T, req *http.Request, sent []byte, resp *http.Response, raw []byte) {
	t.Helper()
	cs, err := contracts()
	if err != nil {
		t.Errorf("OpenAPI documents: %v", err)
		return
	}
	if err := cs.Check(req, sent, resp, raw); err != nil {
		t.Errorf("%v\n%s", err, raw)
	}
}

// generatedClient is the Go client generated from the public OpenAPI
// document (internal/apiclient), talking to base; every exchange it makes
// is checked against the documents.
func generatedClient(t *testing.T, base string) *apiclient.ClientWithResponses {
	t.Helper()
	cs, err := contracts()
	if err != nil {
		t.Fatalf("OpenAPI documents: %v", err)
	}
	c, err := apiclient.NewClientWithResponses(base, apiclient.WithHTTPClient(apitest.Doer{Checker: cs,
		Report: func(err error, body []byte) { t.Errorf("%v\n%s", err, body) }}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// editor sets header's name, value pairs on a generated client's request.
func editor(header []string) apiclient.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return nil
	}
}

// moneyInput is an amount in a generated client's request (t.Errorf:
// goroutines may call it).
func moneyInput(t *testing.T, s string) apiclient.MoneyInput {
	t.Helper()
	var m apiclient.MoneyInput
	if err := m.FromMoneyInput0(s); err != nil {
		t.Errorf("amount %s: %v", s, err)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// call sends body (none if nil) as JSON with header's name, value pairs and
// returns the status and the JSON object answered. Any failure fails the
// test with t.Errorf, so that goroutines may call it too, and returns status
// 0 (or the status and a nil body when the answer is not a JSON object).
func call(t *testing.T, method, url string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	var (
		r    io.Reader
		sent []byte
	)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Errorf("%s %s: request body: %v", method, url, err)
			return 0, nil
		}
		r, sent = bytes.NewReader(b), b
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0, nil
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return 0, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: reading the %d answer: %v", method, url, resp.StatusCode, err)
		return 0, nil
	}
	checkContract(t, req, sent, resp, raw)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Errorf("%s %s: the %d answer is not a JSON object: %v: %q", method, url, resp.StatusCode, err, raw)
		return resp.StatusCode, nil
	}
	return resp.StatusCode, out
}

// TestEndToEnd: a hot auction takes thousands of concurrent bids over HTTP;
// once it has ended and the pipeline drained, PostgreSQL holds exactly the
// bids that got 201, the row is CLOSED with the highest as winner, and the
// auction-closed topic names that winner (duplicates only identical).
func TestEndToEnd(t *testing.T) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	base, broker, db, signer := startBidgate(t)
	// The test talks to the binary as a client would: through the Go
	// client generated from the OpenAPI document, every exchange checked
	// against it.
	c := generatedClient(t, base)
	ctx := context.Background()
	hot, noExtension := true, int64(0)
	created, err := c.CreateAuctionWithResponse(ctx, apiclient.CreateAuctionRequest{Title: "flash lot",
		StartPrice: moneyInput(t, "100"), MinIncrement: moneyInput(t, "1"), EndTime: time.Now().Add(3 * time.Second),
		Hot: &hot, ExtendWindowSeconds: &noExtension}, editor(bearer(t, signer, 1, auth.ScopeSell)))
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create: %v %s", err, created.Body)
	}
	id := created.JSON201.Id
	closed := watchClose(t, base, id)

	var (
		mu       sync.Mutex
		accepted = map[string]float64{} // request id -> amount
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	for g := range 32 {
		// Bidders 101 to 132 (the seller is 1), each with a token minted
		// here, on the test's goroutine.
		authz := editor(bearer(t, signer, int64(101+g), auth.ScopeBid))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > 3000 {
					return
				}
				key := uuid.New()
				r, err := c.PlaceBidWithResponse(ctx, id, &apiclient.PlaceBidParams{IdempotencyKey: key},
					apiclient.BidRequest{Amount: ptr(moneyInput(t, strconv.FormatInt(100+n, 10)))}, authz)
				switch {
				case err != nil:
					t.Errorf("bid: %v", err)
					return
				case r.JSON201 != nil:
					mu.Lock()
					accepted[key.String()] = float64(100 + n)
					mu.Unlock()
				case r.StatusCode() == 409:
				default:
					t.Errorf("bid: %d %s", r.StatusCode(), r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	highest, winner := 0.0, ""
	for k, v := range accepted {
		if v > highest {
			highest, winner = v, k
		}
	}

	// The closer settles the auction within seconds of its end, and its
	// viewers are told.
	var seen map[string]any
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case v := <-closed:
		if v.err != nil {
			t.Fatalf("viewer: %v", v.err)
		}
		seen = v.msg
	case <-timer.C:
		t.Fatal("auction not CLOSED 30s after its end: its viewer was not told")
	}
	// The seller sees the winner's id, as the viewers do.
	read, err := c.GetAuctionWithResponse(ctx, id, nil, editor(bearer(t, signer, 1, auth.ScopeSell)))
	if err != nil || read.JSON200 == nil {
		t.Fatalf("get: %v %s", err, read.Body)
	}
	got := read.JSON200
	if got.Status != apiclient.CLOSED || got.CurrentPrice != seen["currentPrice"] || got.LeaderId == nil || got.Leader == nil ||
		*got.Leader != seen["leader"] {
		t.Fatalf("auction %s after its viewer was told %v", read.Body, seen)
	}
	if got.CurrentPrice != bidgate.FormatMoney(bidgate.FromCents(int64(highest*100))) {
		t.Fatalf("closed at %v, highest accepted bid %v (%s)", got.CurrentPrice, highest, winner)
	}

	// PostgreSQL holds exactly the accepted bids. The persister says nothing
	// when it wrote: count until it has.
	var stored map[string]bool
	eventually(t, 30*time.Second, "the accepted bids in PostgreSQL", func() error {
		if stored = requestIDs(t, db, id); len(stored) < len(accepted) {
			return fmt.Errorf("%d of %d", len(stored), len(accepted))
		}
		return nil
	})
	if len(stored) != len(accepted) {
		t.Fatalf("%d bids in PostgreSQL, %d accepted", len(stored), len(accepted))
	}
	for k := range accepted {
		if !stored[k] {
			t.Fatalf("accepted bid %s missing from PostgreSQL", k)
		}
	}
	t.Logf("%d bids accepted, all in PostgreSQL", len(accepted))

	// The auction-closed event names the winner, as often as it was sent,
	// always the same. Once the outbox row is marked published no more
	// copies come; the marking announces itself to nobody.
	eventually(t, 30*time.Second, "the outbox row published", func() error {
		var published bool
		if err := db.QueryRow(context.Background(), `SELECT COALESCE(bool_and(published_at IS NOT NULL), false) FROM outbox WHERE aggregate_id = $1 AND topic = 'auction-closed'`, id).Scan(&published); err != nil {
			t.Fatal(err)
		}
		if !published {
			return errors.New("not yet")
		}
		return nil
	})
	events := closedEvents(t, broker, id)
	if len(events) == 0 {
		t.Fatalf("no auction-closed event for auction %d", id)
	}
	doc, err := asyncapi.Default()
	if err != nil {
		t.Fatal(err)
	}
	closedMsg, err := doc.Message("auctionClosed")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if err := closedMsg.ValidatePayload([]byte(ev)); err != nil {
			t.Fatalf("auction-closed %s: %v", ev, err)
		}
		if ev != events[0] {
			t.Fatalf("two different events for one auction: %s and %s", events[0], ev)
		}
		var e bidgate.AuctionClosed
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatal(err)
		}
		if e.FinalPrice != got.CurrentPrice || e.WinnerID == nil || *e.WinnerID != *got.LeaderId {
			t.Fatalf("event %s, auction %s", ev, read.Body)
		}
	}
}

func requestIDs(t *testing.T, db *pgxpool.Pool, auction int64) map[string]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT request_id::text FROM bid WHERE auction_id = $1`, auction)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, id := range ids {
		set[id] = true
	}
	return set
}

// closedEvents reads the whole auction-closed topic with kcat, a client of
// another make, and returns the payloads keyed by the auction. Without kcat
// (outside CI) it reads the first such event with kafka-go.
func closedEvents(t *testing.T, broker string, auction int64) []string {
	t.Helper()
	key := strconv.FormatInt(auction, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kcat := testenv.Find(t, "kcat")
	if kcat == "" {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{broker}, Topic: bidgate.TopicAuctionClosed,
			GroupID: "e2e-" + uuid.NewString(), StartOffset: kafkago.FirstOffset, MaxWait: 250 * time.Millisecond})
		defer func() {
			if err := r.Close(); err != nil {
				t.Errorf("close the Kafka reader: %v", err)
			}
		}()
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read auction-closed: %v", err)
			}
			if string(m.Key) == key {
				return []string{string(m.Value)}
			}
		}
	}
	out, err := exec.CommandContext(ctx, kcat, "-C", "-b", broker, "-t", bidgate.TopicAuctionClosed, "-e", "-q", "-f", "%k\t%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	var events []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok && k == key {
			events = append(events, v)
		}
	}
	return events
}

// closing is what a viewer of a closing auction was told: its closed
// message, or why it was told nothing.
type closing struct {
	msg map[string]any
	err error
}

// watchClose connects a viewer of the auction, reads its snapshot, and
// keeps reading; the closed message (the closer's announcement, or fanout's
// own check after the end) comes on the channel.
func watchClose(t *testing.T, base string, id int64) <-chan closing {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/ws/auctions/%d", strings.TrimPrefix(base, "http"), id), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("close the viewer: %v", err)
		}
	})
	snap, err := readFrame(conn)
	if err != nil || snap["type"] != "snapshot" {
		t.Fatalf("first message %v (%v), want the snapshot", snap, err)
	}
	out := make(chan closing, 1)
	go func() {
		for {
			msg, err := readFrame(conn)
			if err != nil {
				out <- closing{err: err}
				return
			}
			if msg["type"] == "closed" {
				out <- closing{msg: msg}
				return
			}
		}
	}()
	return out
}

// readFrame reads a viewer's next message, which must be one the AsyncAPI
// document describes.
func readFrame(conn *websocket.Conn) (map[string]any, error) {
	_, frame, err := conn.ReadMessage()
	if err != nil {
		return nil, err
	}
	if err := asyncapi.ValidateWebSocket(frame); err != nil {
		return nil, err
	}
	var msg map[string]any
	return msg, json.Unmarshal(frame, &msg)
}

// TestWebSocketThroughTheBinary: a viewer of the real binary gets the
// snapshot, then the price of a bid placed over HTTP.
func TestWebSocketThroughTheBinary(t *testing.T) {
	base, _, _, key := startBidgate(t)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	status, a := call(t, "POST", base+"/auctions", map[string]any{"sellerId": 1, "title": "watched",
		"startPrice": "100", "minIncrement": "1", "endTime": end}, bearer(t, key, 1, auth.ScopeSell)...)
	if status != 201 {
		t.Fatalf("create: %d %v", status, a)
	}
	id := int64(a["id"].(float64))
	bids := fmt.Sprintf("%s/auctions/%d/bids", base, id)
	// Bidding needs a token; watching does not.
	if status, body := call(t, "POST", bids, map[string]any{"amount": "150"}, "Idempotency-Key", uuid.NewString()); status != 401 || body["code"] != "unauthenticated" {
		t.Fatalf("bid without a token: %d %v", status, body)
	}
	conn, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("ws%s/ws/auctions/%d", strings.TrimPrefix(base, "http"), id), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	msg, err := readFrame(conn)
	if err != nil || msg["type"] != "snapshot" || msg["currentPrice"] != "100.00" {
		t.Fatalf("first message %v (%v), want the snapshot", msg, err)
	}
	if status, body := call(t, "POST", bids, map[string]any{"amount": "150"},
		append([]string{"Idempotency-Key", uuid.NewString()}, bearer(t, key, 5, auth.ScopeBid)...)...); status != 201 || body["bidderId"] != float64(5) {
		t.Fatalf("bid: %d %v", status, body)
	}
	if msg, err = readFrame(conn); err != nil || msg["type"] != "update" || msg["currentPrice"] != "150.00" || msg["leader"] != "Bidder 1" {
		t.Fatalf("second message %v (%v), want the update", msg, err)
	}
}

// From the binary, as the users see it: two bidders and the seller
// listen on /ws/me (token in Authorization, and for the seller in the
// browser's subprotocol); the second bidder's higher bid tells the first
// they were outbid, and the close tells the winner, the loser and the
// seller. Each frame is what the AsyncAPI document says.
func TestNoticesThroughTheBinary(t *testing.T) {
	base, _, _, key := startBidgate(t)
	// Users' channels are named by user id on the Redis every test shares:
	// ids of this run's own, so another test's notices never reach these
	// sockets.
	seller := 800_000_000_000 + rand.Int64N(1_000_000_000)*10
	alice, bob := seller+1, seller+2
	end := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339Nano)
	status, a := call(t, "POST", base+"/auctions", map[string]any{"title": "told lot", "startPrice": "100", "minIncrement": "1",
		"endTime": end, "extendWindowSeconds": 0}, bearer(t, key, seller, auth.ScopeSell)...)
	if status != 201 {
		t.Fatalf("create: %d %v", status, a)
	}
	id := int64(a["id"].(float64))
	listen := func(user int64, scope string, browser bool) *websocket.Conn {
		t.Helper()
		token := strings.TrimPrefix(bearer(t, key, user, scope)[1], "Bearer ")
		h := http.Header{"Authorization": {"Bearer " + token}}
		if browser {
			h = http.Header{"Sec-WebSocket-Protocol": {"bidgate.bearer, " + token}}
		}
		conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws/me", h)
		if err != nil {
			t.Fatalf("user %d: /ws/me: %v (%v)", user, err, resp)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if err := conn.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	next := func(conn *websocket.Conn, user int64) bidgate.Notice {
		t.Helper()
		_, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("user %d: %v", user, err)
		}
		if err := asyncapi.ValidateWebSocketOn(asyncapi.NoticesChannel, b); err != nil {
			t.Fatalf("user %d: frame %s: %v", user, b, err)
		}
		var f struct {
			Notice bidgate.Notice `json:"notice"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		return f.Notice
	}
	aliceWS, bobWS, sellerWS := listen(alice, auth.ScopeBid, false), listen(bob, auth.ScopeBid, false), listen(seller, auth.ScopeSell, true)
	bid := func(user int64, amount string) {
		t.Helper()
		if status, body := call(t, "POST", fmt.Sprintf("%s/auctions/%d/bids", base, id), map[string]any{"amount": amount},
			append([]string{"Idempotency-Key", uuid.NewString()}, bearer(t, key, user, auth.ScopeBid)...)...); status != 201 {
			t.Fatalf("bid %s by %d: %d %v", amount, user, status, body)
		}
	}
	bid(alice, "110")
	bid(bob, "120")
	want := func(got bidgate.Notice, typ bidgate.NoticeType, user int64, price string) {
		t.Helper()
		if got.Type != typ || got.UserID != user || got.AuctionID != id || got.Price != price || got.Title != "told lot" {
			t.Fatalf("got %+v, want %s to %d at %s", got, typ, user, price)
		}
	}
	want(next(aliceWS, alice), bidgate.NoticeOutbid, alice, "120.00")
	// The close (the closer's pass after the end).
	want(next(aliceWS, alice), bidgate.NoticeLost, alice, "120.00")
	want(next(bobWS, bob), bidgate.NoticeWon, bob, "120.00")
	want(next(sellerWS, seller), bidgate.NoticeSold, seller, "120.00")
}
