package bench

import (
	"errors"
	"strings"
	"testing"

	"bidgate"
)

// msg is a message of auction 7 of the given type, seq and price, led by
// bidder 42, Bidder 2 by the rows of viewerBids (none at seq 0), with seq
// as its bid count.
func msg(kind string, seq int64, price string) viewerMessage {
	m := viewerMessage{Type: kind, AuctionID: 7, CurrentPrice: price, Status: string(bidgate.StatusOpen), BidCount: seq, Seq: seq}
	if seq > 0 {
		alias := "Bidder 2"
		m.Leader = &alias
	}
	if kind == msgClosed {
		m.Status = string(bidgate.StatusClosed)
	}
	return m
}

// TestViewerChecks: a viewer's messages in arrival order, and the
// database's final row, make the two viewer checks pass or fail.
func TestViewerChecks(t *testing.T) {
	closedRow := AuctionRow{ID: 7, Status: string(bidgate.StatusClosed), CurrentPrice: "1030.00", LeaderID: 42, BidCount: 3}
	rising := []viewerMessage{msg(msgSnapshot, 0, "1000.00"), msg("update", 1, "1010.00"), msg("update", 3, "1030.00"), msg(msgClosed, 3, "1030.00")}
	for _, tc := range []struct {
		name      string
		msgs      []viewerMessage
		bad       int    // undecodable messages after msgs
		dropped   string // the connection's end before a closed message
		row       AuctionRow
		order     int // failures of viewer-order
		final     int // failures of viewer-final
		finalSeen int // viewers viewer-final checks
	}{
		{name: "rising, closed equal to the row", msgs: rising, row: closedRow, finalSeen: 1},
		{name: "the same seq again", msgs: []viewerMessage{msg(msgSnapshot, 1, "1010.00"), msg("update", 1, "1010.00"),
			msg(msgClosed, 3, "1030.00")}, row: closedRow, finalSeen: 1},
		{name: "a lower seq after a higher one", msgs: []viewerMessage{msg(msgSnapshot, 0, "1000.00"), msg("update", 3, "1030.00"),
			msg("update", 1, "1030.00"), msg(msgClosed, 3, "1030.00")}, row: closedRow, order: 1, finalSeen: 1},
		{name: "a lower price at a higher seq", msgs: []viewerMessage{msg(msgSnapshot, 1, "1010.00"), msg("update", 2, "1005.00"),
			msg(msgClosed, 3, "1030.00")}, row: closedRow, order: 1, finalSeen: 1},
		{name: "another price at the same seq", msgs: []viewerMessage{msg(msgSnapshot, 1, "1010.00"), msg("update", 1, "1020.00"),
			msg(msgClosed, 3, "1030.00")}, row: closedRow, order: 1, finalSeen: 1},
		{name: "another auction's message", msgs: append([]viewerMessage{{Type: "update", AuctionID: 8, CurrentPrice: "1.00", Seq: 9}}, rising...),
			row: closedRow, order: 1, finalSeen: 1},
		{name: "an undecodable message", msgs: rising, bad: 1, row: closedRow, order: 1, finalSeen: 1},
		{name: "no closed message while connected", msgs: rising[:3], row: closedRow, final: 1, finalSeen: 1},
		{name: "dropped before the closed message", msgs: rising[:3], dropped: "closed 1008 too slow", row: closedRow},
		{name: "closed at another price", msgs: rising, row: AuctionRow{ID: 7, Status: "CLOSED", CurrentPrice: "1040.00", LeaderID: 42, BidCount: 3},
			final: 1, finalSeen: 1},
		{name: "closed with another leader", msgs: rising, row: AuctionRow{ID: 7, Status: "CLOSED", CurrentPrice: "1030.00", LeaderID: 43, BidCount: 3},
			final: 1, finalSeen: 1},
		{name: "closed with another bid count", msgs: rising, row: AuctionRow{ID: 7, Status: "CLOSED", CurrentPrice: "1030.00", LeaderID: 42, BidCount: 4},
			final: 1, finalSeen: 1},
		{name: "closed while the database has it open", msgs: rising, row: AuctionRow{ID: 7, Status: "OPEN", CurrentPrice: "1030.00", LeaderID: 42, BidCount: 3},
			final: 1, finalSeen: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ViewerLog{Viewer: 1, AuctionID: 7}
			for _, m := range tc.msgs {
				l.observe(m)
			}
			for range tc.bad {
				l.undecodable(errors.New("not JSON"))
			}
			if tc.dropped != "" && l.Final == nil {
				l.Dropped = tc.dropped
			}
			checks := Audit(Dataset{Auctions: []AuctionSpec{{ID: 7, StartPrice: "1000.00", MinIncrement: "10.00"}},
				Rows: []AuctionRow{tc.row}, Bids: viewerBids, Watched: true, Viewers: []ViewerLog{l}})
			order, final := find(t, checks, CheckViewerOrder), find(t, checks, CheckViewerFinal)
			if order.Failed != tc.order || order.Pass != (tc.order == 0) || order.Checked != len(tc.msgs)+tc.bad {
				t.Errorf("viewer-order: %+v, want %d failed of %d", order, tc.order, len(tc.msgs)+tc.bad)
			}
			if final.Failed != tc.final || final.Pass != (tc.final == 0) || final.Checked != tc.finalSeen {
				t.Errorf("viewer-final: %+v, want %d failed of %d", final, tc.final, tc.finalSeen)
			}
			for _, ex := range append(order.Examples, final.Examples...) {
				if !strings.Contains(ex, "auction 7") {
					t.Errorf("example %q does not name the auction", ex)
				}
			}
		})
	}
}

// TestViewerChecksOnlyWithViewers: a run without viewers has no viewer
// checks; one whose viewers all failed to connect has them, with nothing
// checked.
func TestViewerChecksOnlyWithViewers(t *testing.T) {
	for _, watched := range []bool{false, true} {
		checks := Audit(Dataset{Watched: watched})
		has := false
		for _, c := range checks {
			if c.ID == CheckViewerOrder || c.ID == CheckViewerFinal {
				has = true
				if c.Checked != 0 || !c.Pass {
					t.Errorf("%s: %+v", c.ID, c)
				}
			}
		}
		if has != watched {
			t.Errorf("watched %v: viewer checks present %v", watched, has)
		}
	}
}

func find(t *testing.T, checks []Check, id string) Check {
	t.Helper()
	for _, c := range checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %s", id)
	return Check{}
}

// TestSourceAddr: viewers share a loopback source address perSource at a
// time, only toward an IPv4 target.
func TestSourceAddr(t *testing.T) {
	for _, tc := range []struct {
		perSource, i int
		target       string
		want         string // "": the system's choice
	}{
		{200, 0, "127.0.0.1:8080", "127.0.0.1"},
		{200, 199, "127.0.0.1:8080", "127.0.0.1"},
		{200, 200, "127.0.0.1:8080", "127.0.0.2"},
		{200, 9999, "127.0.0.1:8080", "127.0.0.50"},
		{1, 300, "127.0.0.1:8080", "127.0.1.45"},
		{0, 300, "127.0.0.1:8080", ""},
		{200, 300, "[::1]:8080", ""},
	} {
		got, ok := sourceAddr(tc.perSource, tc.i, tc.target)
		if (tc.want == "") == ok || (ok && got.String() != tc.want) {
			t.Errorf("sourceAddr(%d, %d, %s) = %v, %v; want %q", tc.perSource, tc.i, tc.target, got, ok, tc.want)
		}
	}
	if n := sources(200, 3000); n != 15 {
		t.Errorf("3000 viewers at 200 a source use %d sources, want 15", n)
	}
}

// viewerBids are auction 7's rows: bidder 43 first (Bidder 1), then 42
// (Bidder 2).
var viewerBids = []BidRow{{AuctionID: 7, BidderID: 43, Seq: 1, Amount: "1010.00"}, {AuctionID: 7, BidderID: 42, Seq: 2, Amount: "1020.00"},
	{AuctionID: 7, BidderID: 42, Seq: 3, Amount: "1030.00"}}
