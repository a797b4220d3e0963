package bidgate

import (
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// BidRequest is one attempt to bid. RequestID is the client's Idempotency-Key:
// within one auction it names at most one bid, whatever the retries.
type BidRequest struct {
	AuctionID int64
	BidderID  int64
	Amount    decimal.Decimal
	RequestID uuid.UUID
}

// Validate checks the parts of a bid that need no store.
func (r BidRequest) Validate() error {
	if r.AuctionID <= 0 {
		return InvalidInput("invalid_id", "auction id must be a positive integer")
	}
	if r.BidderID <= 0 {
		return InvalidInput("invalid_bidder_id", "bidderId must be a positive integer")
	}
	if r.RequestID == uuid.Nil {
		return InvalidInput("invalid_idempotency_key", "Idempotency-Key must be a non-nil UUID")
	}
	return CheckMoney("amount", r.Amount, false)
}

// Bid is an accepted bid as recorded by the store that serialized it.
type Bid struct {
	AuctionID  int64
	BidderID   int64
	Amount     decimal.Decimal
	RequestID  uuid.UUID
	AcceptedAt time.Time // the serializing store's clock
	EndTime    time.Time // the auction's end right after this bid (extended or not)
	Seq        int64     // the bid's position in its auction: 1, 2, ...
}

// BidResult is the outcome of a successful PlaceBid: a new bid, or the bid an
// earlier request with the same key created (Replayed).
type BidResult struct {
	Bid      Bid
	Replayed bool
}

// SameAs reports whether r asks for what b records; a replayed key with other
// terms is an error, not a replay.
func (b Bid) SameAs(r BidRequest) bool {
	return b.BidderID == r.BidderID && b.Amount.Equal(r.Amount)
}
