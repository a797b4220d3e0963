package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/asyncapi"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// inboxNode is an Inbox behind a real fasthttp server on 127.0.0.1; the
// user is the X-Test-User header (the gateway authenticates in front).
type inboxNode struct {
	inbox *Inbox
	addr  string
	env   *env
}

func startInbox(tb testing.TB, e *env, cfg InboxConfig) *inboxNode {
	tb.Helper()
	b := NewInbox(e.rdb, e.svc, cfg, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(bg)
	runDone := make(chan error, 1)
	go func() { runDone <- b.Run(ctx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(c *fasthttp.RequestCtx) {
		user, err := strconv.ParseInt(string(c.Request.Header.Peek("X-Test-User")), 10, 64)
		if err != nil {
			c.SetStatusCode(fasthttp.StatusUnauthorized)
			return
		}
		b.ServeWS(c, user)
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
	return &inboxNode{inbox: b, addr: ln.Addr().String(), env: e}
}

func (n *inboxNode) url(query string) string { return "ws://" + n.addr + "/ws/me" + query }

func userHeader(user int64) http.Header {
	return http.Header{"X-Test-User": {strconv.FormatInt(user, 10)}}
}

// deliver does what the notifier does: store the notices, then publish them.
func (n *inboxNode) deliver(tb testing.TB, notices ...bidgate.Notice) {
	tb.Helper()
	err := pgx.BeginFunc(bg, n.env.db, func(tx pgx.Tx) error {
		_, err := pgstore.StoreNotices(bg, tx, notices)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := redisstore.New(n.env.rdb).PublishNotices(bg, notices); err != nil {
		tb.Fatal(err)
	}
}

// noticeClient reads /ws/me frames into notices.
type noticeClient struct {
	conn *websocket.Conn
	got  chan bidgate.Notice
}

func (n *inboxNode) dial(tb testing.TB, user int64, query string) *noticeClient {
	tb.Helper()
	conn, resp, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial(n.url(query), userHeader(user))
	if err != nil {
		tb.Fatalf("dial /ws/me%s: %v (%s)", query, err, describe(resp))
	}
	c := &noticeClient{conn: conn, got: make(chan bidgate.Notice, 1000)}
	go func() {
		defer close(c.got)
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if err := asyncapi.ValidateWebSocketOn(asyncapi.NoticesChannel, b); err != nil {
				tb.Errorf("frame %s: %v", b, err)
				return
			}
			var f struct {
				Type   string         `json:"type"`
				Notice bidgate.Notice `json:"notice"`
			}
			if err := json.Unmarshal(b, &f); err != nil || f.Type != "notice" {
				tb.Errorf("frame %s: %v", b, err)
				return
			}
			c.got <- f.Notice
		}
	}()
	tb.Cleanup(func() { _ = conn.Close() })
	return c
}

func (c *noticeClient) next(tb testing.TB) bidgate.Notice {
	tb.Helper()
	select {
	case n, ok := <-c.got:
		if !ok {
			tb.Fatal("connection ended")
		}
		return n
	case <-time.After(10 * time.Second):
		tb.Fatal("no notice within 10s")
	}
	return bidgate.Notice{}
}

// testNotice is a notice to user; the type is the id's prefix.
func testNotice(id string, user int64) bidgate.Notice {
	t, _, _ := strings.Cut(id, "-")
	return bidgate.Notice{ID: id, Type: bidgate.NoticeType(t), UserID: user, AuctionID: 5, Title: "lot", Price: "10.00",
		At: time.Now().UTC().Truncate(time.Microsecond)}
}

// A user's connection gets their notices as they are stored, never
// another user's; with ?after= it first gets what it missed, oldest first,
// each notice once.
func TestInboxDeliversOwnNoticesOnly(t *testing.T) {
	e := newEnv(t)
	n := startInbox(t, e, InboxConfig{})
	const alice, bob = 4_000_001, 4_000_002
	n.deliver(t, testNotice("outbid-5-1", alice), testNotice("outbid-5-2", alice), testNotice("outbid-5-3", bob))

	a := n.dial(t, alice, "")
	b := n.dial(t, bob, "")
	// Connected users count as listening (their close notices go first).
	const carol = 4_000_003
	on, err := redisstore.New(e.rdb).Listening(bg, []int64{alice, bob, carol})
	if err != nil || !on[alice] || !on[bob] || on[carol] {
		t.Fatalf("listening %v (%v), want alice and bob", on, err)
	}
	n.deliver(t, testNotice("outbid-5-4", bob), testNotice("outbid-5-5", alice))
	if got := a.next(t); got.ID != "outbid-5-5" || got.UserID != alice {
		t.Fatalf("alice got %+v, want outbid-5-5", got)
	}
	if got := b.next(t); got.ID != "outbid-5-4" || got.UserID != bob {
		t.Fatalf("bob got %+v, want outbid-5-4", got)
	}

	// Reconnecting after outbid-5-1: 5-2 and 5-5 again, in order, then
	// what comes next; bob's never.
	r := n.dial(t, alice, "?after=outbid-5-1")
	for _, want := range []string{"outbid-5-2", "outbid-5-5"} {
		if got := r.next(t); got.ID != want {
			t.Fatalf("replay: got %s, want %s", got.ID, want)
		}
	}
	n.deliver(t, testNotice("won-5", alice))
	if got := r.next(t); got.ID != "won-5" {
		t.Fatalf("after the replay: got %s, want won-5", got.ID)
	}
	if got := a.next(t); got.ID != "won-5" {
		t.Fatalf("alice's first connection: got %s, want won-5", got.ID)
	}
	select {
	case extra := <-r.got:
		t.Fatalf("one more notice %+v", extra)
	default:
	}
}

// Refusals come before the upgrade, as problems.
func TestInboxRefusals(t *testing.T) {
	e := newEnv(t)
	n := startInbox(t, e, InboxConfig{MaxPerUser: 2})
	const alice, bob = 4_000_011, 4_000_012
	n.deliver(t, testNotice("outbid-6-1", bob))
	for _, tc := range []struct {
		name, query string
		status      int
		code        string
	}{
		{"another user's notice", "?after=outbid-6-1", 400, "invalid_query"},
		{"no such notice", "?after=outbid-6-99", 400, "invalid_query"},
		{"not a notice id", "?after=drop%20table", 400, "invalid_query"},
		{"an unknown parameter", "?token=abc", 400, "invalid_query"},
		{"after twice", "?after=outbid-6-1&after=outbid-6-1", 400, "invalid_query"},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, n.url(tc.query), userHeader(alice), tc.status, tc.code) })
	}
	t.Run("a plain GET", func(t *testing.T) {
		req, err := http.NewRequest("GET", "http://"+n.addr+"/ws/me", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = userHeader(alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		checkProblem(t, resp, 426, "upgrade_required")
	})
	t.Run("a user's third connection", func(t *testing.T) {
		n.dial(t, alice, "")
		n.dial(t, alice, "")
		refused(t, n.url(""), userHeader(alice), 429, "rate_limited")
	})
}

// Two nodes on one Redis: a user connected to both gets each notice on
// both; another user on either gets none of them.
func TestInboxAcrossNodes(t *testing.T) {
	e := newEnv(t)
	n1, n2 := startInbox(t, e, InboxConfig{}), startInbox(t, e, InboxConfig{})
	const alice, bob = 4_000_031, 4_000_032
	a1, a2, b1, b2 := n1.dial(t, alice, ""), n2.dial(t, alice, ""), n1.dial(t, bob, ""), n2.dial(t, bob, "")
	n1.deliver(t, testNotice("outbid-8-1", alice), testNotice("outbid-8-2", bob))
	for _, c := range []struct {
		name string
		c    *noticeClient
		user int64
		id   string
	}{{"alice on node 1", a1, alice, "outbid-8-1"}, {"alice on node 2", a2, alice, "outbid-8-1"},
		{"bob on node 1", b1, bob, "outbid-8-2"}, {"bob on node 2", b2, bob, "outbid-8-2"}} {
		if got := c.c.next(t); got.ID != c.id || got.UserID != c.user {
			t.Fatalf("%s got %+v, want %s", c.name, got, c.id)
		}
	}
}

// A connection that stops reading is dropped once its queue fills, and the
// same user's other connection, and other users, keep getting their
// notices on time: dispatch never waits for a client.
func TestInboxDropsASlowConnection(t *testing.T) {
	e := newEnv(t)
	n := startInbox(t, e, InboxConfig{Queue: 4, WriteTimeout: time.Second})
	const slowUser, bob = 4_000_021, 4_000_022
	// A client that never reads: its socket buffers fill, then the
	// server's write blocks, then its queue.
	slow, resp, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial(n.url(""), userHeader(slowUser))
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, describe(resp))
	}
	t.Cleanup(func() { _ = slow.Close() })
	fast := n.dial(t, bob, "")

	big := strings.Repeat("x", 1000)
	pub := redisstore.New(e.rdb)
	seq := 0
	for chunk := 0; testutil.ToFloat64(n.inbox.metrics.dropped) == 0; chunk++ {
		if chunk == 200 {
			t.Fatal("200,000 notices published and the connection that reads none is still served")
		}
		batch := make([]bidgate.Notice, 1000)
		for i := range batch {
			seq++
			batch[i] = testNotice("outbid-7-"+strconv.Itoa(seq), slowUser)
			batch[i].Title = big
		}
		if err := pub.PublishNotices(bg, batch); err != nil {
			t.Fatal(err)
		}
		// Interleaved, bob's notices arrive while the slow one's pile up.
		seq++
		id := "outbid-8-" + strconv.Itoa(seq)
		if err := pub.PublishNotices(bg, []bidgate.Notice{testNotice(id, bob)}); err != nil {
			t.Fatal(err)
		}
		if got := fast.next(t); got.ID != id {
			t.Fatalf("bob got %s, want %s", got.ID, id)
		}
	}
	// The dropped connection ends: reading it drains what the kernel held,
	// then fails.
	_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		if _, _, err := slow.ReadMessage(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the dropped connection is still open after 30s")
			}
			break
		}
	}
	// Reconnected, the user is served again.
	again := n.dial(t, slowUser, "")
	id := "won-7"
	if err := pub.PublishNotices(bg, []bidgate.Notice{testNotice(id, slowUser)}); err != nil {
		t.Fatal(err)
	}
	if got := again.next(t); got.ID != id {
		t.Fatalf("the reconnected user got %s, want %s", got.ID, id)
	}
}
