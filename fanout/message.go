package fanout

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fasthttp/websocket"

	"bidgate"
)

// Message types a viewer receives, in this order: one snapshot, updates,
// and at most one closed (after which the server closes the socket).
const (
	typeSnapshot = "snapshot"
	typeUpdate   = "update"
	typeClosed   = "closed"
)

// wireMessage is the JSON a viewer receives. UpdatedAt (when the store made
// the state) is passed through from the published update when it has one,
// so that a client can see how fresh a price is.
type wireMessage struct {
	Type         string         `json:"type"`
	AuctionID    int64          `json:"auctionId"`
	CurrentPrice string         `json:"currentPrice"`
	Leader       *string        `json:"leader"` // the alias: viewers are the public
	EndTime      string         `json:"endTime"`
	Status       bidgate.Status `json:"status"`
	BidCount     int64          `json:"bidCount"`
	Seq          int64          `json:"seq"`
	UpdatedAt    string         `json:"updatedAt,omitempty"`
	// IntervalMs is the coalescing interval a flushed state was sent
	// under: more than the usual while the node sheds viewer load.
	IntervalMs int64 `json:"intervalMs,omitempty"`
}

// rank orders the states of one auction. Seq (the bid count) only rises
// while the auction is open; the CLOSED state is final, so it beats every
// open state (the closer announces it with the final bid count, which no
// open state exceeds) and nothing beats it.
type rank struct {
	seq    int64
	closed bool
}

func rankOf(u bidgate.StateUpdate) rank {
	return rank{seq: u.Seq, closed: u.Status.Final()}
}

// newer reports whether a state of rank r should replace one of rank old.
func (r rank) newer(old rank) bool {
	if old.closed {
		return false
	}
	return r.closed || r.seq > old.seq
}

// message is one encoded state, framed once and written as is to every
// viewer of the auction: the cost of a flush is one encoding plus one write
// per viewer.
type message struct {
	rank      rank
	frame     *websocket.PreparedMessage
	updatedAt time.Time // zero when the state did not say
}

// encode frames u as a message of type kind; a final state (CLOSED or
// CANCELLED) is always sent as type closed.
// interval is the coalescing interval of a flush (zero for a snapshot).
func encode(kind string, u bidgate.StateUpdate, interval time.Duration) (*message, error) {
	if u.Status.Final() {
		kind = typeClosed
	}
	b, err := json.Marshal(wireMessage{Type: kind, AuctionID: u.AuctionID, CurrentPrice: u.CurrentPrice,
		Leader: u.Leader, EndTime: u.EndTime, Status: u.Status, BidCount: u.BidCount, Seq: u.Seq,
		UpdatedAt: u.UpdatedAt, IntervalMs: interval.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("encode state of auction %d: %w", u.AuctionID, err)
	}
	frame, err := websocket.NewPreparedMessage(websocket.TextMessage, b)
	if err != nil {
		return nil, fmt.Errorf("frame state of auction %d: %w", u.AuctionID, err)
	}
	m := &message{rank: rankOf(u), frame: frame}
	if u.UpdatedAt != "" {
		// Only a metric depends on it: an unparsable time just goes unmeasured.
		m.updatedAt, _ = time.Parse(time.RFC3339Nano, u.UpdatedAt)
	}
	return m, nil
}
