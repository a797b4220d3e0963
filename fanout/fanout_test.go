package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testdb"
)

func TestViewerSeesSnapshotUpdatesAndClose(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{})
	a := createAuction(t, e.svc, true)

	c := dial(t, n, a.ID)
	snap := c.next(t, 5*time.Second)
	if snap.Type != typeSnapshot || snap.Seq != 0 || snap.CurrentPrice != "100.00" || snap.Leader != nil ||
		snap.Status != bidgate.StatusOpen || snap.AuctionID != a.ID {
		t.Fatalf("snapshot %+v", snap)
	}

	// A burst from several bidders at once; the viewer ends on the newest price.
	var wg sync.WaitGroup
	for w := range 5 {
		wg.Go(func() {
			for i := range 10 {
				// Some lose the race and are too low; nothing else may fail.
				if _, err := placeBid(e.svc, a.ID, int64(w+1), 101+int64(i*5+w)); err != nil && !errors.Is(err, bidgate.ErrBidTooLow) && !errors.Is(err, bidgate.ErrAlreadyLeading) {
					t.Errorf("bid: %v", err)
				}
			}
		})
	}
	wg.Wait()
	final, err := e.svc.Auction(bg, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := c.until(t, final.BidCount, 5*time.Second)
	last := got[len(got)-1]
	if last.Type != typeUpdate || last.CurrentPrice != bidgate.FormatMoney(final.CurrentPrice) ||
		final.LeaderAlias == 0 || leader(last) != final.LeaderAlias || last.BidCount != final.BidCount {
		t.Fatalf("last update %+v; auction %+v", last, final)
	}
	for _, m := range got {
		if m.Type != typeUpdate || m.Seq <= snap.Seq {
			t.Fatalf("after the snapshot: %+v", m)
		}
	}

	u := publishClosed(t, e.rdb, e.svc, a.ID)
	closed := c.next(t, 5*time.Second)
	if closed.Type != typeClosed || closed.Status != bidgate.StatusClosed || u.Leader == nil || closed.Leader == nil || *closed.Leader != *u.Leader ||
		closed.CurrentPrice != u.CurrentPrice || closed.Seq != u.Seq {
		t.Fatalf("closed %+v; published %+v", closed, u)
	}
	c.closed(t, websocket.CloseNormalClosure, 5*time.Second)
}

func TestCoalescesBurstToFewMessages(t *testing.T) {
	e := newEnv(t)
	flushes := &flushLog{}
	n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{tune: flushes.attach})
	a := createAuction(t, e.svc, true)
	viewers := make([]*client, 4)
	for i := range viewers {
		viewers[i] = dial(t, n, a.ID)
		if m := viewers[i].next(t, 5*time.Second); m.Type != typeSnapshot {
			t.Fatalf("first message %+v", m)
		}
	}

	// 2,000 bids over one second: bid i is due at i*500µs, with amount
	// 101+i, placed by 16 bidders at once (some lose the race and are too low).
	const bids, workers = 2000, 16
	var next, accepted atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= bids {
					return
				}
				time.Sleep(time.Until(start.Add(time.Duration(i) * 500 * time.Microsecond))) // pacing
				_, err := placeBid(e.svc, a.ID, int64(w+1), 101+i)
				switch {
				case err == nil:
					accepted.Add(1)
				case !errors.Is(err, bidgate.ErrBidTooLow) && !errors.Is(err, bidgate.ErrAlreadyLeading):
					t.Errorf("bid %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	final, err := e.svc.Auction(bg, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.BidCount != accepted.Load() || accepted.Load() < bids/4 {
		t.Fatalf("%d bids accepted, auction says %d", accepted.Load(), final.BidCount)
	}
	got := make([][]wireMessage, len(viewers))
	for i, c := range viewers {
		got[i] = c.until(t, final.BidCount, 5*time.Second)
	}
	// Every update a viewer got is one flush, and flushes are an interval
	// apart: at most one message per interval.
	sent := flushes.spaced(t, a.ID, n.hub.cfg.Interval)
	t.Logf("%d of %d bids accepted in %v, sent in %d flushes", accepted.Load(), bids, time.Since(start), len(sent))
	for i, msgs := range got {
		last := msgs[len(msgs)-1]
		if last.CurrentPrice != bidgate.FormatMoney(final.CurrentPrice) || final.LeaderAlias == 0 || leader(last) != final.LeaderAlias || last.Seq != final.BidCount {
			t.Fatalf("viewer %d ended on %+v; auction %+v", i, last, final)
		}
		for j := 1; j < len(msgs); j++ {
			if msgs[j].Seq <= msgs[j-1].Seq {
				t.Fatalf("viewer %d: seq %d after %d", i, msgs[j].Seq, msgs[j-1].Seq)
			}
		}
		// Each flushed state says the interval it was sent under: the
		// configured one, or more if the governor stretched it.
		for _, m := range msgs {
			if m.IntervalMs < n.hub.cfg.Interval.Milliseconds() || m.IntervalMs > n.hub.cfg.MaxInterval.Milliseconds() {
				t.Fatalf("viewer %d: %+v sent under an interval of %d ms", i, m, m.IntervalMs)
			}
		}
		if len(msgs) > len(sent) || int64(len(msgs)) >= final.BidCount {
			t.Fatalf("viewer %d got %d updates for %d bids in %d flushes", i, len(msgs), final.BidCount, len(sent))
		}
		t.Logf("viewer %d: %d messages (snapshot included)", i, len(msgs)+1)
	}
}

func TestViewerOnOtherNodeSeesBids(t *testing.T) {
	e := newEnv(t)
	svcB := newShard(e.db, e.rdb)
	nodeA := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{})
	nodeB := startNode(t, e.rdb, svcB, Config{}, nodeOpts{})
	a := createAuction(t, e.svc, false) // cold: every bid publishes

	onB, onA := dial(t, nodeB, a.ID), dial(t, nodeA, a.ID)
	onB.next(t, 5*time.Second)
	onA.next(t, 5*time.Second)
	var last bidgate.Bid
	for i := range 5 {
		last = mustBid(t, e.svc, a.ID, int64(10+i), 110+int64(i*10))
	}
	for _, c := range []*client{onB, onA} {
		got := c.until(t, last.Seq, 5*time.Second)
		if m := got[len(got)-1]; m.CurrentPrice != "150.00" || leader(m) != 5 || m.Seq != last.Seq { // bidder 14, the fifth
			t.Fatalf("last message %+v", m)
		}
	}
}

func TestSlowViewerDoesNotDelayOthers(t *testing.T) {
	e := newEnv(t)
	cfg := Config{Interval: 10 * time.Millisecond, SlowTimeout: 200 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}
	// Small server socket buffers (withSmallBuffers) make a viewer that
	// stops reading block the server's writes within a few dozen messages.
	n := startNode(t, e.rdb, e.svc, cfg, nodeOpts{wrap: withSmallBuffers})
	a := createAuction(t, e.svc, true)

	stuck := rawViewer(t, n, a.ID)
	good := make([]*client, 3)
	for i := range good {
		good[i] = dial(t, n, a.ID)
		good[i].next(t, 5*time.Second)
	}

	// 500 bids/s for 3 s; the good viewers must keep up all along.
	var (
		wg                sync.WaitGroup
		maxBid, lastPlace time.Duration
		amount            int64 = 100
		bids              int64
	)
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			amount++
			began := time.Now()
			if _, err := placeBid(e.svc, a.ID, 1+amount%7, amount); err != nil {
				t.Errorf("bid %d: %v", amount, err)
				return
			}
			lastPlace = time.Since(began)
			maxBid = max(maxBid, lastPlace)
			bids++
		}
	})
	gaps := make([]time.Duration, len(good))
	seen := make([]int64, len(good)) // the last seq each good viewer got
	for i, c := range good {
		wg.Go(func() {
			prev := time.Now()
			for ctx.Err() == nil {
				select {
				case m, ok := <-c.msgs:
					if !ok {
						t.Errorf("good viewer %d dropped: %v", i, c.err)
						return
					}
					seen[i] = m.Seq
				case <-ctx.Done():
					return
				}
				gaps[i] = max(gaps[i], time.Since(prev))
				prev = time.Now()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d bids, slowest %v; longest gap between messages per good viewer %v", bids, maxBid, gaps)
	if maxBid > time.Second {
		t.Errorf("a bid took %v", maxBid)
	}
	for i, g := range gaps {
		if g > 500*time.Millisecond {
			t.Errorf("good viewer %d waited %v between messages", i, g)
		}
	}
	final, err := e.svc.Auction(bg, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range good {
		if seen[i] < final.BidCount {
			c.until(t, final.BidCount, 5*time.Second)
		}
	}

	// The stuck viewer was dropped: reading what its socket holds ends in
	// the server's close, not in a live connection.
	waitEOF(t, stuck)
	if v := testutil.ToFloat64(n.hub.metrics.slowClosed); v != 1 {
		t.Fatalf("slow viewers closed: %v, want 1", v)
	}
	if v := testutil.ToFloat64(n.hub.metrics.overflows); v == 0 {
		t.Fatalf("no queue overflow counted")
	}
}

func TestLaggingViewerIsClosedTooSlow(t *testing.T) {
	e := newEnv(t)
	cfg := Config{Interval: 5 * time.Millisecond, SlowTimeout: 300 * time.Millisecond, WriteTimeout: 3 * time.Second}
	n := startNode(t, e.rdb, e.svc, cfg, nodeOpts{wrap: withSmallBuffers})
	a := createAuction(t, e.svc, true)

	// A viewer that reads 50 messages/s while up to 200/s are due, over a
	// tiny receive buffer: its queue overflows on every flush.
	d := net.Dialer{Control: tinyReceiveBuffer}
	conn, _, err := (&websocket.Dialer{NetDialContext: d.DialContext}).Dial(n.url(a.ID), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	bidding := make(chan struct{})
	go func() {
		defer close(bidding)
		for amount := int64(101); ctx.Err() == nil; amount++ {
			if _, err := placeBid(e.svc, a.ID, 1+amount%7, amount); err != nil {
				t.Errorf("bid %d: %v", amount, err)
				return
			}
		}
	}()
	var msgs int
	for {
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		_, b, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			if ce.Code != websocket.ClosePolicyViolation || ce.Text != reasonSlow {
				t.Fatalf("closed with %d %q", ce.Code, ce.Text)
			}
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", msgs, err)
		}
		if _, err := decodeFrame(b); err != nil {
			t.Fatal(err)
		}
		msgs++
		time.Sleep(20 * time.Millisecond) // the viewer's own slowness
	}
	cancel()
	<-bidding
	t.Logf("closed as too slow after %d messages", msgs)
	if v := testutil.ToFloat64(n.hub.metrics.slowClosed); v != 1 {
		t.Fatalf("slow viewers closed: %v, want 1", v)
	}
}

func tinyReceiveBuffer(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
	})
	return errors.Join(err, serr)
}

// smallBuffers gives accepted sockets a small send buffer.
type smallBuffers struct{ net.Listener }

func withSmallBuffers(ln net.Listener) net.Listener { return smallBuffers{ln} }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(4096); err != nil {
			// Ends Serve: without the small buffer the test proves nothing.
			return nil, errors.Join(fmt.Errorf("shrink the send buffer: %w", err), tc.Close())
		}
	}
	return c, err
}

func TestRefusalsAndUnsubscribe(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{MaxViewers: 2, CheckOrigin: func(o string) bool { return o != "https://evil.example" }}, nodeOpts{})
	a := createAuction(t, e.svc, false)

	refused(t, n.url(a.ID+1000), nil, http.StatusNotFound, "auction_not_found")
	refused(t, n.url(a.ID), http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden, "origin_not_allowed")
	if r := n.rooms(); r != 0 {
		t.Fatalf("%d rooms after refusals", r)
	}
	resp, err := http.Get("http://" + n.addr + "/ws/auctions/" + itoa(a.ID))
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, resp, http.StatusUpgradeRequired, "upgrade_required")

	c1, c2 := dial(t, n, a.ID), dial(t, n, a.ID)
	c1.next(t, 5*time.Second)
	c2.next(t, 5*time.Second)
	resp = refused(t, n.url(a.ID), nil, http.StatusServiceUnavailable, "too_many_viewers")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if s, v := testutil.ToFloat64(n.hub.metrics.subscriptions), testutil.ToFloat64(n.hub.metrics.viewers); s != 1 || v != 2 {
		t.Fatalf("subscriptions %v, viewers %v; want 1 and 2", s, v)
	}

	c1.leave(t)
	if s := testutil.ToFloat64(n.hub.metrics.subscriptions); s != 1 {
		t.Fatalf("subscriptions %v with one viewer left", s)
	}
	c2.leave(t)
	if s, v, r := testutil.ToFloat64(n.hub.metrics.subscriptions), testutil.ToFloat64(n.hub.metrics.viewers), n.rooms(); s != 0 || v != 0 || r != 0 {
		t.Fatalf("after the last viewer left: subscriptions %v, viewers %v, rooms %d", s, v, r)
	}
	// The slots were given back.
	dial(t, n, a.ID).next(t, 5*time.Second)
}

// After a quiet period the first update goes out at once, not after the
// interval: with an interval of an hour it still arrives. (How soon it
// arrives is BenchmarkFirstUpdate's.)
func TestFirstUpdateAtOnce(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{Interval: time.Hour}, nodeOpts{})
	a := createAuction(t, e.svc, false)
	c := dial(t, n, a.ID)
	c.next(t, 5*time.Second)
	mustBid(t, e.svc, a.ID, 3, 150)
	if m := c.next(t, 10*time.Second); m.Type != typeUpdate || m.Seq != 1 || m.CurrentPrice != "150.00" {
		t.Fatalf("first update %+v", m)
	}
}

// The CLOSED state right after an update waits for the interval, by the
// server's clock, but is not coalesced away.
func TestClosedNotCoalescedAway(t *testing.T) {
	e := newEnv(t)
	const interval = 2 * time.Second
	flushes := &flushLog{}
	n := startNode(t, e.rdb, e.svc, Config{Interval: interval}, nodeOpts{tune: flushes.attach})
	a := createAuction(t, e.svc, false)
	c := dial(t, n, a.ID)
	c.next(t, 5*time.Second)

	mustBid(t, e.svc, a.ID, 3, 150)
	if m := c.next(t, 10*time.Second); m.Seq != 1 || m.CurrentPrice != "150.00" {
		t.Fatalf("first update %+v", m)
	}
	mustBid(t, e.svc, a.ID, 4, 160)
	u := publishClosed(t, e.rdb, e.svc, a.ID)
	m := c.next(t, interval+10*time.Second)
	if m.Type != typeClosed || m.Seq != u.Seq || leader(m) != 2 || m.CurrentPrice != "160.00" { // bidder 4, after 3
		t.Fatalf("closed %+v", m)
	}
	c.closed(t, websocket.CloseNormalClosure, 5*time.Second)
	fl := flushes.spaced(t, a.ID, interval)
	if last := fl[len(fl)-1]; last.u.Status != bidgate.StatusClosed || last.u.Seq != u.Seq {
		t.Fatalf("last flush %+v, want the closed state", last.u)
	}
}

// closedSnapshot answers every auction as closed.
type closedSnapshot struct{}

func (closedSnapshot) Auction(_ context.Context, id int64) (bidgate.Auction, error) {
	return bidgate.Auction{ID: id, Status: bidgate.StatusClosed, LeaderID: 9, LeaderAlias: 3, BidCount: 4, EndTime: time.Now()}, nil
}

func TestClosedAuctionSnapshotThenClose(t *testing.T) {
	n := startNode(t, newEnv(t).rdb, closedSnapshot{}, Config{}, nodeOpts{})
	c := dial(t, n, 42)
	if m := c.next(t, 5*time.Second); m.Type != typeClosed || m.Seq != 4 || leader(m) != 3 {
		t.Fatalf("first message %+v", m)
	}
	c.closed(t, websocket.CloseNormalClosure, 5*time.Second)
}

func TestViewerThatDoesNotPongIsDropped(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{PingInterval: 100 * time.Millisecond}, nodeOpts{})
	a := createAuction(t, e.svc, false)
	conn := rawViewer(t, n, a.ID)
	// Reading (the snapshot, the pings) but never answering a ping.
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the server did not drop a viewer that never pongs: %v", err)
	}
	if r := n.rooms(); r != 0 {
		t.Fatalf("%d rooms after the only viewer was dropped", r)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestEndedAuctionClosesWithoutAnnouncement(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{tune: func(h *Hub) { h.endGrace = 200 * time.Millisecond }})
	a, err := e.svc.CreateAuction(bg, bidgate.NewAuction{SellerID: 9_000_007, Title: "short lot", StartPrice: decimal.NewFromInt(100),
		MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Second), ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, n, a.ID)
	c.next(t, 5*time.Second)
	mustBid(t, e.svc, a.ID, 5, 120)
	c.until(t, 1, 5*time.Second)

	// The closer settles the auction but its CLOSED announcement is lost.
	testdb.WaitForEnd(t, e.db, a.ID)
	if _, err := e.db.Exec(bg, `UPDATE auction SET status = 'CLOSED', closed_at = clock_timestamp() WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	if m := c.next(t, 10*time.Second); m.Type != typeClosed || leader(m) != 1 || m.CurrentPrice != "120.00" {
		t.Fatalf("closed %+v", m)
	}
	c.closed(t, websocket.CloseNormalClosure, 5*time.Second)
}

// One client address holds at most MaxViewersPerAddr viewers (429); other
// addresses are not held back by it, and a slot comes back when a viewer
// leaves.
func TestViewersPerAddress(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{MaxViewersPerAddr: 2}, nodeOpts{})
	a := createAuction(t, e.svc, false)
	c1 := dial(t, n, a.ID)
	c1.next(t, 5*time.Second)
	dial(t, n, a.ID).next(t, 5*time.Second)
	if resp := refused(t, n.url(a.ID), nil, http.StatusTooManyRequests, "rate_limited"); resp.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// From another loopback address: its own allowance.
	other := &websocket.Dialer{HandshakeTimeout: 10 * time.Second,
		NetDial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
			return d.Dial(network, addr)
		}}
	conn, resp, err := other.Dial(n.url(a.ID), nil)
	if err != nil {
		t.Fatalf("dial from 127.0.0.2: %v (%s)", err, describe(resp))
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("close the viewer from 127.0.0.2: %v", err)
		}
	})
	c1.leave(t)
	dial(t, n, a.ID).next(t, 5*time.Second)
}

// A seller's cancel reaches the viewers as the final message: type closed,
// status CANCELLED; a viewer who connects afterwards gets just that.
func TestViewersSeeCancel(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{})
	for _, hot := range []bool{false, true} {
		a := createAuction(t, e.svc, hot)
		c := dial(t, n, a.ID)
		if m := c.next(t, 5*time.Second); m.Type != typeSnapshot {
			t.Fatalf("first message %+v", m)
		}
		if _, err := e.svc.Cancel(bg, a.ID, a.SellerID); err != nil {
			t.Fatal(err)
		}
		if m := c.next(t, 5*time.Second); m.Type != typeClosed || m.Status != bidgate.StatusCancelled {
			t.Fatalf("hot %v: after the cancel %+v", hot, m)
		}
		late := dial(t, n, a.ID)
		if m := late.next(t, 5*time.Second); m.Type != typeClosed || m.Status != bidgate.StatusCancelled {
			t.Fatalf("hot %v: a late viewer's first message %+v", hot, m)
		}
	}
}

// TestViewersSeeAutomaticBids: when a leader's proxy answers a bid, viewers
// get the price after the automatic bid, with the leader unchanged, and
// never the leader's hidden maximum.
func TestViewersSeeAutomaticBids(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{})
	for _, hot := range []bool{false, true} {
		a := createAuction(t, e.svc, hot) // start 100, increment 1
		c := dial(t, n, a.ID)
		if _, err := e.svc.PlaceBid(bg, bidgate.BidRequest{AuctionID: a.ID, BidderID: 1, Amount: decimal.NewFromInt(377),
			Proxy: true, RequestID: uuid.New()}); err != nil {
			t.Fatal(err)
		}
		if res, err := placeBid(e.svc, a.ID, 2, 150); err != nil || res.Leading {
			t.Fatalf("the answered bid: %+v, %v", res, err)
		}
		msgs := c.until(t, 3, 5*time.Second) // the proxy, the bid, the automatic answer
		last := msgs[len(msgs)-1]
		if last.CurrentPrice != "151.00" || leader(last) != 1 || last.Seq != 3 {
			t.Fatalf("hot %v: last message %+v", hot, last)
		}
		for _, m := range msgs {
			if m.CurrentPrice == "377.00" {
				t.Fatalf("hot %v: a viewer saw the hidden maximum: %+v", hot, m)
			}
		}
	}
}
