package bidgate

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// StateUpdate is an auction's state as viewers receive it. Seq is the
// auction's bid count and only rises, so a listener can drop older updates.
type StateUpdate struct {
	AuctionID    int64  `json:"auctionId"`
	CurrentPrice string `json:"currentPrice"`
	// Leader is the leader's alias ("Bidder 3"; nil while nobody leads, or
	// not known): viewers are the public and never get the leader's id.
	Leader *string `json:"leader"`
	// LeaderID is the leader the alias belongs to, for merging an update
	// that does not say the alias (the closer's); never sent.
	LeaderID int64  `json:"-"`
	EndTime  string `json:"endTime"`
	Status   Status `json:"status"`
	BidCount int64  `json:"bidCount"`
	Seq      int64  `json:"seq"`
	// UpdatedAt is when the store that serializes the auction made this
	// state (the newest bid's acceptance), for measuring delivery lag.
	UpdatedAt string `json:"updatedAt,omitempty"`
}

// NewStateUpdate builds the update for an auction's state.
func NewStateUpdate(a Auction) StateUpdate {
	u := StateUpdate{AuctionID: a.ID, CurrentPrice: FormatMoney(a.CurrentPrice), LeaderID: a.LeaderID,
		EndTime: a.EndTime.UTC().Format(time.RFC3339Nano), Status: a.Status, BidCount: a.BidCount, Seq: a.BidCount}
	if a.LeaderID != 0 && a.LeaderAlias > 0 {
		name := AliasName(a.LeaderAlias)
		u.Leader = &name
	}
	return u
}

// AliasName is how a bidder is named to those who may not know who it is.
func AliasName(alias int64) string { return "Bidder " + strconv.FormatInt(alias, 10) }

// AuctionClosed is the payload of an auction-closed event. Consumers must be
// idempotent per AuctionID: the event is delivered at least once, and every
// copy carries the same winner and price.
type AuctionClosed struct {
	AuctionID  int64     `json:"auctionId"`
	WinnerID   *int64    `json:"winnerId"` // nil when nobody bid
	FinalPrice string    `json:"finalPrice"`
	ClosedAt   time.Time `json:"closedAt"`
	BidCount   int64     `json:"bidCount"`
	// ReserveMet is there only for an auction with a reserve; when false,
	// WinnerID is nil: nobody won.
	ReserveMet *bool `json:"reserveMet,omitempty"`
}

// AuctionCancelled is the payload of an auction-cancelled event, delivered
// at least once; every copy is the same.
type AuctionCancelled struct {
	AuctionID   int64     `json:"auctionId"`
	SellerID    int64     `json:"sellerId"`
	CancelledAt time.Time `json:"cancelledAt"`
}

// BidAccepted is the payload of a bid-accepted message: one bid accepted on
// the hot path, as its auction's Redis log recorded it. StreamID is the
// entry's id in that log.
type BidAccepted struct {
	AuctionID  int64     `json:"auctionId"`
	BidderID   int64     `json:"bidderId"`
	Amount     string    `json:"amount"`
	Kind       BidKind   `json:"kind,omitempty"`      // empty: straight (a message from before proxy bids)
	MaxAmount  string    `json:"maxAmount,omitempty"` // a proxy row's hidden maximum
	RequestID  string    `json:"requestId"`
	Seq        int64     `json:"seq"`
	AcceptedAt time.Time `json:"acceptedAt"`
	EndTime    time.Time `json:"endTime"`
	StreamID   string    `json:"streamId"`
	// Outbid is the leader this row took the lead from (0: none) and
	// OutbidMax that leader's maximum: the writer of the row tells them
	// (an outbid Notice), in the transaction that writes it.
	Outbid    int64  `json:"outbid,omitempty"`
	OutbidMax string `json:"outbidMax,omitempty"`
}

// Validate checks what a hot bid's writer needs: positive ids and seq, an
// amount of money, a request id that is a UUID.
func (b BidAccepted) Validate() error {
	if b.AuctionID <= 0 || b.BidderID <= 0 || b.Seq <= 0 {
		return fmt.Errorf("bid %d/%d: auction, bidder and seq must be positive", b.AuctionID, b.Seq)
	}
	amount, err := ParseMoney(b.Amount)
	if err != nil {
		return fmt.Errorf("bid %d/%d: amount: %w", b.AuctionID, b.Seq, err)
	}
	switch b.Kind {
	case "", KindStraight, KindAutomatic, KindBuyNow:
		if b.MaxAmount != "" {
			return fmt.Errorf("bid %d/%d: a %s row has no maximum", b.AuctionID, b.Seq, b.Kind)
		}
	case KindProxy:
		max, err := ParseMoney(b.MaxAmount)
		if err != nil {
			return fmt.Errorf("bid %d/%d: maxAmount: %w", b.AuctionID, b.Seq, err)
		}
		if max.LessThan(amount) {
			return fmt.Errorf("bid %d/%d: maxAmount below amount", b.AuctionID, b.Seq)
		}
	default:
		return fmt.Errorf("bid %d/%d: unknown kind %q", b.AuctionID, b.Seq, b.Kind)
	}
	if _, err := uuid.Parse(b.RequestID); err != nil {
		return fmt.Errorf("bid %d/%d: request id: %w", b.AuctionID, b.Seq, err)
	}
	if b.AcceptedAt.IsZero() || b.EndTime.IsZero() {
		return fmt.Errorf("bid %d/%d: no acceptance or end time", b.AuctionID, b.Seq)
	}
	if b.Outbid < 0 || b.Outbid == b.BidderID || (b.Outbid == 0) != (b.OutbidMax == "") {
		return fmt.Errorf("bid %d/%d: outbid %d with maximum %q", b.AuctionID, b.Seq, b.Outbid, b.OutbidMax)
	}
	if b.Outbid != 0 {
		if _, err := ParseMoney(b.OutbidMax); err != nil {
			return fmt.Errorf("bid %d/%d: outbidMax: %w", b.AuctionID, b.Seq, err)
		}
	}
	return nil
}

// The Kafka topics bidgate produces, keyed by auction id so that one
// auction's messages keep their order in one partition; bid-notifications
// is keyed by the user's id instead, for the same of one user's notices.
const (
	TopicBidAccepted      = "bid-accepted"
	TopicAuctionClosed    = "auction-closed"
	TopicAuctionCancelled = "auction-cancelled"
	TopicBidNotifications = "bid-notifications"
)

// Topics lists every topic bidgate uses.
var Topics = []string{TopicBidAccepted, TopicAuctionClosed, TopicAuctionCancelled, TopicBidNotifications}
