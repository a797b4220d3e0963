package fanout

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/asyncapi"
	"bidgate/internal/problem"
	"bidgate/internal/testdb"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
	"bidgate/shard"
)

var bg = context.Background()

// env is a fresh database, the test Redis and a shard service on both.
type env struct {
	db  *pgxpool.Pool
	rdb redis.UniversalClient
	svc *shard.Service
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	db, _ := testdb.New(tb, 16)
	rdb := testredis.Client(tb)
	return &env{db: db, rdb: rdb, svc: newShard(db, rdb)}
}

func newShard(db *pgxpool.Pool, rdb redis.UniversalClient) *shard.Service {
	return shard.New(db, rdb, shard.Config{RateLimit: -1, PromoteRate: -1, StoreTimeout: testStoreTimeout, ColdLockTimeout: testColdLockTimeout}, prometheus.NewRegistry())
}

// node is a Hub behind a real fasthttp server on 127.0.0.1.
type node struct {
	hub  *Hub
	addr string
}

// nodeOpts shape a test node: wrap wraps its listener (to shape the
// server's sockets), tune adjusts the hub before it runs.
type nodeOpts struct {
	wrap func(net.Listener) net.Listener
	tune func(*Hub)
}

// startNode serves hub.ServeWS on /ws/auctions/{id}. Everything stops when
// tb ends.
func startNode(tb testing.TB, rdb redis.UniversalClient, snap Snapshotter, cfg Config, opts nodeOpts) *node {
	tb.Helper()
	hub := New(rdb, snap, cfg, prometheus.NewRegistry())
	if opts.tune != nil {
		opts.tune(hub)
	}
	ctx, cancel := context.WithCancel(bg)
	runDone := make(chan error, 1)
	go func() { runDone <- hub.Run(ctx) }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	if opts.wrap != nil {
		ln = opts.wrap(ln)
	}
	srv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
		rest, ok := strings.CutPrefix(string(c.Path()), "/ws/auctions/")
		id, err := strconv.ParseInt(rest, 10, 64)
		if !ok || err != nil {
			c.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		hub.ServeWS(c, id)
	}}
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-runDone; err != nil {
			tb.Errorf("Run: %v", err)
		}
		if err := srv.Shutdown(); err != nil {
			tb.Errorf("shut the server down: %v", err)
		}
		if err := <-srvDone; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return &node{hub: hub, addr: addr}
}

func (n *node) url(id int64) string { return fmt.Sprintf("ws://%s/ws/auctions/%d", n.addr, id) }

// rooms is how many auctions the node is subscribed to.
func (n *node) rooms() int {
	n.hub.mu.Lock()
	defer n.hub.mu.Unlock()
	return len(n.hub.rooms)
}

// client is a WebSocket viewer whose messages arrive on msgs; err holds
// why the reading ended once msgs is closed.
type client struct {
	conn *websocket.Conn
	msgs chan wireMessage
	err  error
}

func dial(tb testing.TB, n *node, id int64) *client {
	tb.Helper()
	conn, resp, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial(n.url(id), nil)
	if err != nil {
		tb.Fatalf("dial %s: %v (%s)", n.url(id), err, describe(resp))
	}
	c := &client{conn: conn, msgs: make(chan wireMessage, 10000)}
	go c.read()
	tb.Cleanup(func() {
		if err := conn.Close(); err != nil {
			tb.Errorf("close viewer: %v", err)
		}
	})
	return c
}

func (c *client) read() {
	defer close(c.msgs)
	for {
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			c.err = err
			return
		}
		m, err := decodeFrame(b)
		if err != nil {
			c.err = err
			return
		}
		c.msgs <- m
	}
}

// decodeFrame is the one way the tests read a viewer's frame: it must be a
// message of the AsyncAPI document (an undocumented field, type or status
// fails the test that read it), then it is decoded.
func decodeFrame(b []byte) (wireMessage, error) {
	var m wireMessage
	if err := asyncapi.ValidateWebSocket(b); err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode %q: %w", b, err)
	}
	return m, nil
}

// next returns the next message, failing the test after d.
func (c *client) next(tb testing.TB, d time.Duration) wireMessage {
	tb.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m, ok := <-c.msgs:
		if !ok {
			tb.Fatalf("connection ended: %v", c.err)
		}
		return m
	case <-t.C:
		tb.Fatalf("no message within %v", d)
	}
	return wireMessage{}
}

// until reads until a message has at least seq (or is closed), checking that
// seq never goes down, and returns every message read.
func (c *client) until(tb testing.TB, seq int64, d time.Duration) []wireMessage {
	tb.Helper()
	deadline := time.Now().Add(d)
	var got []wireMessage
	for {
		m := c.next(tb, time.Until(deadline))
		if len(got) > 0 && m.Seq < got[len(got)-1].Seq {
			tb.Fatalf("seq went down: %d after %d", m.Seq, got[len(got)-1].Seq)
		}
		got = append(got, m)
		if m.Seq >= seq || m.Type == typeClosed {
			return got
		}
	}
}

// closed waits for the end of the connection and checks its close code.
func (c *client) closed(tb testing.TB, code int, d time.Duration) {
	tb.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case m, ok := <-c.msgs:
		if ok {
			tb.Fatalf("message %+v where the close was expected", m)
		}
	case <-t.C:
		tb.Fatalf("not closed within %v", d)
	}
	var ce *websocket.CloseError
	if !errors.As(c.err, &ce) || ce.Code != code {
		tb.Fatalf("connection ended with %v, want close code %d", c.err, code)
	}
}

// leave does the closing handshake from the client's side and waits for the
// server to close the socket (it leaves its room before).
func (c *client) leave(tb testing.TB) {
	tb.Helper()
	if err := c.conn.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second)); err != nil {
		tb.Fatal(err)
	}
	c.closed(tb, websocket.CloseNormalClosure, 5*time.Second)
	waitEOF(tb, c.conn.NetConn())
}

// waitEOF reads conn until the peer closes it.
func waitEOF(tb testing.TB, conn net.Conn) {
	tb.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, net.ErrClosed) {
		tb.Fatalf("wait for the server to close the socket: %v", err)
	}
}

// refused dials and expects the handshake to be answered with status and a
// problem document of code; it returns the answer.
func refused(tb testing.TB, url string, header http.Header, status int, code string) *http.Response {
	tb.Helper()
	conn, resp, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial(url, header)
	if err == nil {
		conn.Close()
		tb.Fatalf("dial %s succeeded; want %d %s", url, status, code)
	}
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
		tb.Fatalf("dial %s: %v; want a refused handshake", url, err)
	}
	checkProblem(tb, resp, status, code)
	return resp
}

func checkProblem(tb testing.TB, resp *http.Response, status int, code string) {
	tb.Helper()
	defer resp.Body.Close()
	var p problem.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		tb.Fatalf("decode problem: %v", err)
	}
	if resp.StatusCode != status || p.Status != status || p.Code != code || p.Type != "urn:bidgate:problem:"+code ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		tb.Fatalf("got %d %s %+v; want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), p, status, code)
	}
}

func describe(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Sprintf("%d, body unreadable: %v", resp.StatusCode, err)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// rawViewer completes a WebSocket handshake over a socket with a tiny
// receive buffer and returns it without reading anything more: a viewer
// that stopped reading.
func rawViewer(tb testing.TB, n *node, id int64) net.Conn {
	tb.Helper()
	d := net.Dialer{Control: tinyReceiveBuffer}
	conn, err := d.Dial("tcp", n.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := conn.Close(); err != nil {
			tb.Errorf("close raw viewer: %v", err)
		}
	})
	if _, err := fmt.Fprintf(conn, "GET /ws/auctions/%d HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", id, n.addr); err != nil {
		tb.Fatalf("raw handshake: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	if err != nil {
		tb.Fatalf("raw handshake: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		tb.Fatalf("raw handshake: %s", describe(resp))
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		tb.Fatal(err)
	}
	return conn
}

func createAuction(tb testing.TB, svc *shard.Service, hot bool) bidgate.Auction {
	tb.Helper()
	a, err := svc.CreateAuction(bg, bidgate.NewAuction{SellerID: 9_000_007, Title: "lot", StartPrice: decimal.NewFromInt(100),
		MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), Hot: hot,
		ExtendWindow: bidgate.DefaultExtendWindow, ExtendBy: bidgate.DefaultExtendBy})
	if err != nil {
		tb.Fatalf("create auction: %v", err)
	}
	return a
}

func placeBid(svc *shard.Service, auction, bidder int64, amount int64) (bidgate.BidResult, error) {
	return svc.PlaceBid(bg, bidgate.BidRequest{AuctionID: auction, BidderID: bidder,
		Amount: decimal.NewFromInt(amount), RequestID: uuid.New()})
}

func mustBid(tb testing.TB, svc *shard.Service, auction, bidder int64, amount int64) bidgate.Bid {
	tb.Helper()
	res, err := placeBid(svc, auction, bidder, amount)
	if err != nil {
		tb.Fatalf("bid %d by %d: %v", amount, bidder, err)
	}
	return res.Bid
}

// publishClosed announces the auction's current state as CLOSED, the way
// the closer does.
func publishClosed(tb testing.TB, rdb redis.UniversalClient, svc *shard.Service, id int64) bidgate.StateUpdate {
	tb.Helper()
	a, err := svc.Auction(bg, id)
	if err != nil {
		tb.Fatal(err)
	}
	a.Status = bidgate.StatusClosed
	u := redisstore.UpdateOf(a, time.Time{})
	if err := redisstore.New(rdb).Publish(bg, u); err != nil {
		tb.Fatal(err)
	}
	return u.StateUpdate()
}

// flush is one flush of a room, as the server stamped it.
type flush struct {
	at time.Time
	u  bidgate.StateUpdate
}

// flushLog records a node's flushes; give nodeOpts.tune its attach.
type flushLog struct {
	mu      sync.Mutex
	flushes map[int64][]flush
}

func (l *flushLog) attach(h *Hub) { h.flushed = l.add }

func (l *flushLog) add(id int64, at time.Time, u bidgate.StateUpdate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flushes == nil {
		l.flushes = map[int64][]flush{}
	}
	l.flushes[id] = append(l.flushes[id], flush{at: at, u: u})
}

// spaced returns the auction's flushes so far, failing unless they are at
// least interval apart on the server's own (monotonic) clock: how the
// coalescing looks from inside, which no load on the test's side can blur.
func (l *flushLog) spaced(tb testing.TB, id int64, interval time.Duration) []flush {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	fl := slices.Clone(l.flushes[id])
	for i := 1; i < len(fl); i++ {
		if gap := fl[i].at.Sub(fl[i-1].at); gap < interval {
			tb.Fatalf("auction %d: flush %d (seq %d) came %v after the one before (seq %d), inside the %v interval",
				id, i, fl[i].u.Seq, gap, fl[i-1].u.Seq, interval)
		}
	}
	return fl
}

// leader is the alias a message names the leader by; 0: none.
func leader(m wireMessage) int64 {
	if m.Leader == nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(*m.Leader, "Bidder "), 10, 64)
	if err != nil || bidgate.AliasName(n) != *m.Leader {
		return -1
	}
	return n
}

// testStoreTimeout is the bid budget of these tests' shards: they check
// what is decided, not how fast, and a loaded test machine can take longer
// than the production default (shard TestColdBidGivesUpOnALockedRow and
// cmd/bidgate's stall tests check that budget).
const testStoreTimeout = time.Minute

// testColdLockTimeout is these shards' wait for a cold auction's row lock,
// for the same reason: bids racing for one row queue for it.
const testColdLockTimeout = 30 * time.Second
