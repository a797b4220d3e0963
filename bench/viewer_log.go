package bench

import (
	"fmt"

	"github.com/shopspring/decimal"
)

// viewerMessage is the part of a WebSocket message (docs/api.md "Watch an
// auction") a viewer reads.
type viewerMessage struct {
	Type         string  `json:"type"`
	AuctionID    int64   `json:"auctionId"`
	CurrentPrice string  `json:"currentPrice"`
	Leader       *string `json:"leader"`
	Status       string  `json:"status"`
	BidCount     int64   `json:"bidCount"`
	Seq          int64   `json:"seq"`
	UpdatedAt    string  `json:"updatedAt"`
}

// Message types a viewer receives.
const (
	msgSnapshot = "snapshot"
	msgClosed   = "closed"
)

// ViewerState is an auction's state as one message showed it.
type ViewerState struct {
	Seq      int64  `json:"seq"`
	Price    string `json:"currentPrice"`
	Leader   string `json:"leader"` // the alias; "": none
	BidCount int64  `json:"bidCount"`
	Status   string `json:"status"`
}

func stateOf(m viewerMessage) ViewerState {
	s := ViewerState{Seq: m.Seq, Price: m.CurrentPrice, BidCount: m.BidCount, Status: m.Status}
	if m.Leader != nil {
		s.Leader = *m.Leader
	}
	return s
}

// ViewerLog is what one viewer saw, kept small (thousands of viewers take
// hundreds of messages each): counts, the first steps backwards and the
// final state. Only its viewer's goroutine writes it.
type ViewerLog struct {
	Viewer    int   `json:"viewer"`
	AuctionID int64 `json:"auctionId"`
	Target    int   `json:"target"`
	Messages  int64 `json:"messages"`
	// Backwards counts the messages that went back: a lower seq than one
	// seen before, a lower price, or another price at a seq already seen;
	// an undecodable message or one after the closed message counts too.
	Backwards int      `json:"backwards"`
	Examples  []string `json:"examples,omitempty"`
	// Final is the closed message's state; nil when none came.
	Final *ViewerState `json:"final,omitempty"`
	// Dropped says why the connection ended before the closed message (a
	// close frame or read error); "" when the viewer stayed connected
	// until the closed message or until the harness stopped watching.
	Dropped string `json:"dropped,omitempty"`

	newest    ViewerState
	newestAmt decimal.Decimal
	seen      bool
}

// backwards counts a message that went back, with an example.
func (l *ViewerLog) backwards(format string, args ...any) {
	l.Backwards++
	if len(l.Examples) < maxExamples {
		l.Examples = append(l.Examples, fmt.Sprintf(format, args...))
	}
}

// observe takes the viewer's next message in arrival order.
func (l *ViewerLog) observe(m viewerMessage) {
	l.Messages++
	s := stateOf(m)
	if l.Final != nil {
		l.backwards("seq %d (%s) came after the closed message", s.Seq, m.Type)
		return
	}
	amt, err := decimal.NewFromString(s.Price)
	switch {
	case m.AuctionID != l.AuctionID:
		l.backwards("a message of auction %d (seq %d)", m.AuctionID, s.Seq)
		return
	case err != nil:
		l.backwards("seq %d: price %q is not an amount", s.Seq, s.Price)
		return
	case !l.seen:
	case s.Seq < l.newest.Seq:
		l.backwards("seq %d (price %s) after seq %d (price %s)", s.Seq, s.Price, l.newest.Seq, l.newest.Price)
	case amt.LessThan(l.newestAmt):
		l.backwards("price %s at seq %d after %s at seq %d", s.Price, s.Seq, l.newest.Price, l.newest.Seq)
	case s.Seq == l.newest.Seq && !amt.Equal(l.newestAmt):
		l.backwards("seq %d shown at price %s, then at %s", s.Seq, l.newest.Price, s.Price)
	}
	if !l.seen || s.Seq >= l.newest.Seq {
		l.newest, l.newestAmt, l.seen = s, amt, true
	}
	if m.Type == msgClosed {
		l.Final = &s
	}
}

// undecodable counts a message that is not one of the documented ones.
func (l *ViewerLog) undecodable(err error) {
	l.Messages++
	l.backwards("a message that does not decode: %v", err)
}
