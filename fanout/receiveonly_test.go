package fanout

import (
	"errors"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Viewers are receive-only: a viewer that sends a text or binary message is
// closed with 1008 at its first one, counted, and the auction's other
// viewers keep receiving.
func TestViewerThatSendsDataIsClosed(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name    string
		msgType int
		payload []byte
	}{
		{"text", websocket.TextMessage, []byte(`{"type":"subscribe"}`)},
		{"binary", websocket.BinaryMessage, []byte{0, 1, 2}},
		{"empty text", websocket.TextMessage, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{})
			a := createAuction(t, e.svc, false) // cold: every bid publishes
			others := []*client{dial(t, n, a.ID), dial(t, n, a.ID)}
			sender := dial(t, n, a.ID)
			for _, v := range append(others, sender) {
				v.next(t, 5*time.Second) // the snapshot
			}
			if err := sender.conn.WriteMessage(c.msgType, c.payload); err != nil {
				t.Fatal(err)
			}
			sender.closed(t, websocket.ClosePolicyViolation, 5*time.Second)
			if ce := (*websocket.CloseError)(nil); !errors.As(sender.err, &ce) || ce.Text != reasonReceiveOnly {
				t.Fatalf("closed with %v, want reason %q", sender.err, reasonReceiveOnly)
			}
			bid := mustBid(t, e.svc, a.ID, 42, 150)
			for i, v := range others {
				if got := v.until(t, bid.Seq, 5*time.Second); got[len(got)-1].Seq != bid.Seq {
					t.Fatalf("viewer %d: last message %+v, want seq %d", i, got[len(got)-1], bid.Seq)
				}
			}
			if v := testutil.ToFloat64(n.hub.metrics.violations.WithLabelValues(violationDataFrame)); v != 1 {
				t.Fatalf("data frame violations: %v, want 1", v)
			}
		})
	}
}

// Control frames are rate-limited: a viewer that floods pings is closed
// with 1008 within a few dozen of them, while one that pings now and then
// (a client's keep-alive) keeps receiving.
func TestPingFloodIsClosed(t *testing.T) {
	e := newEnv(t)
	n := startNode(t, e.rdb, e.svc, Config{}, nodeOpts{})
	a := createAuction(t, e.svc, false)
	flood, polite := dial(t, n, a.ID), dial(t, n, a.ID)
	flood.next(t, 5*time.Second)
	polite.next(t, 5*time.Second)

	for range controlBurst / 2 {
		if err := polite.conn.WriteControl(websocket.PingMessage, []byte("keep-alive"), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	var sent int
	for ; sent < 100_000; sent++ {
		if err := flood.conn.WriteControl(websocket.PingMessage, []byte("x"), time.Now().Add(time.Second)); err != nil {
			break // the server has closed the connection
		}
	}
	flood.closed(t, websocket.ClosePolicyViolation, 5*time.Second)
	if ce := (*websocket.CloseError)(nil); !errors.As(flood.err, &ce) || ce.Text != reasonControlFlood {
		t.Fatalf("closed with %v, want reason %q", flood.err, reasonControlFlood)
	}
	t.Logf("closed after %d pings written", sent)

	bid := mustBid(t, e.svc, a.ID, 42, 150)
	if got := polite.until(t, bid.Seq, 5*time.Second); got[len(got)-1].Seq != bid.Seq {
		t.Fatalf("the polite viewer's last message %+v, want seq %d", got[len(got)-1], bid.Seq)
	}
	if v := testutil.ToFloat64(n.hub.metrics.violations.WithLabelValues(violationControlFlood)); v != 1 {
		t.Fatalf("control flood violations: %v, want 1", v)
	}
}
