package bidgate

import (
	"strconv"
	"time"
)

// UpdatesChannel is the Redis pub/sub channel that carries an auction's
// state after every change.
func UpdatesChannel(auctionID int64) string { return "auction:" + strconv.FormatInt(auctionID, 10) }

// StateUpdate is the message published on UpdatesChannel. Seq is the
// auction's bid count and only rises, so a listener can drop older updates.
type StateUpdate struct {
	AuctionID    int64  `json:"auctionId"`
	CurrentPrice string `json:"currentPrice"`
	LeaderID     *int64 `json:"leaderId"`
	EndTime      string `json:"endTime"`
	Status       Status `json:"status"`
	BidCount     int64  `json:"bidCount"`
	Seq          int64  `json:"seq"`
	// UpdatedAt is when the store that serializes the auction made this
	// state (the newest bid's acceptance), for measuring delivery lag.
	UpdatedAt string `json:"updatedAt,omitempty"`
}

// NewStateUpdate builds the update for an auction's state.
func NewStateUpdate(a Auction) StateUpdate {
	u := StateUpdate{AuctionID: a.ID, CurrentPrice: FormatMoney(a.CurrentPrice),
		EndTime: a.EndTime.UTC().Format(time.RFC3339Nano), Status: a.Status, BidCount: a.BidCount, Seq: a.BidCount}
	if a.LeaderID != 0 {
		leader := a.LeaderID
		u.LeaderID = &leader
	}
	return u
}

// AuctionClosed is the payload of an auction-closed event. Consumers must be
// idempotent per AuctionID: the event is delivered at least once, and every
// copy carries the same winner and price.
type AuctionClosed struct {
	AuctionID  int64     `json:"auctionId"`
	WinnerID   *int64    `json:"winnerId"` // nil when nobody bid
	FinalPrice string    `json:"finalPrice"`
	ClosedAt   time.Time `json:"closedAt"`
	BidCount   int64     `json:"bidCount"`
}

// BidAccepted is the payload of a bid-accepted message: one bid accepted on
// the hot path, as its auction's Redis log recorded it. StreamID is the
// entry's id in that log.
type BidAccepted struct {
	AuctionID  int64     `json:"auctionId"`
	BidderID   int64     `json:"bidderId"`
	Amount     string    `json:"amount"`
	RequestID  string    `json:"requestId"`
	Seq        int64     `json:"seq"`
	AcceptedAt time.Time `json:"acceptedAt"`
	EndTime    time.Time `json:"endTime"`
	StreamID   string    `json:"streamId"`
}
