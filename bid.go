package bidgate

import (
	"crypto/sha1"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// BidKind says what an accepted bid row is.
type BidKind string

const (
	KindStraight BidKind = "straight" // the bidder's own amount
	// KindProxy: a bidder's maximum, bid for them up to it; the row holds
	// the amount it stood at when decided.
	KindProxy BidKind = "proxy"
	// KindAutomatic: the bid a leader's proxy made in answer to a
	// challenger, recorded right after the challenger's row.
	KindAutomatic BidKind = "automatic"
	KindBuyNow    BidKind = "buy_now"
)

// BidRequest is one attempt to bid. RequestID is the client's Idempotency-Key:
// within one auction it names at most one bid, whatever the retries.
// Amount is the bid's value: the amount of a straight bid, the maximum of a
// proxy bid.
type BidRequest struct {
	AuctionID int64
	BidderID  int64
	Amount    decimal.Decimal
	Proxy     bool
	BuyNow    bool // a buy-now: no amount, the auction's buy-now price
	RequestID uuid.UUID
}

// Kind is the kind of row the request makes when accepted.
func (r BidRequest) Kind() BidKind {
	if r.BuyNow {
		return KindBuyNow
	}
	if r.Proxy {
		return KindProxy
	}
	return KindStraight
}

// Validate checks the parts of a bid that need no store.
func (r BidRequest) Validate() error {
	if r.AuctionID <= 0 {
		return InvalidInput("invalid_id", "auction id must be a positive integer")
	}
	if r.BidderID <= 0 {
		return InvalidInput("invalid_bidder_id", "bidderId must be a positive integer")
	}
	if r.RequestID == uuid.Nil || r.RequestID.Variant() == uuid.Future {
		// The reserved variant is bidgate's own (AutomaticRequestID).
		return InvalidInput("invalid_idempotency_key", "Idempotency-Key must be a non-nil RFC 9562 UUID")
	}
	if r.BuyNow {
		return nil
	}
	field := "amount"
	if r.Proxy {
		field = "maxAmount"
	}
	return CheckMoney(field, r.Amount, false)
}

// AutomaticRequestID is the request id of the automatic row a leader's
// proxy records in answer to the challenger whose key is challenger: derived,
// so that any writer of the row (the cold statement, the batch script, a
// re-fed log) names it alike. Its variant is RFC 9562's reserved one, which
// no client key may have, so it never meets a client's key. bid_batch.lua
// derives it the same way (TestAutomaticRequestID).
func AutomaticRequestID(challenger uuid.UUID) uuid.UUID {
	h := sha1.Sum([]byte("bidgate-automatic:" + challenger.String()))
	var id uuid.UUID
	copy(id[:], h[:16])
	id[6] = id[6]&0x0f | 0x50 // version 5: name-based, SHA-1
	id[8] = id[8]&0x1f | 0xe0 // variant 111: reserved
	return id
}

// Bid is an accepted bid as recorded by the store that serialized it.
type Bid struct {
	AuctionID int64
	BidderID  int64
	// Amount is the row's amount: a straight bid's own, the amount a proxy
	// bid stood at, an automatic bid's, a buy-now's price.
	Amount decimal.Decimal
	Kind   BidKind
	// MaxAmount is a proxy row's hidden maximum (shown only to its bidder).
	MaxAmount  decimal.NullDecimal
	RequestID  uuid.UUID
	AcceptedAt time.Time // the serializing store's clock
	EndTime    time.Time // the auction's end right after this bid (extended or not)
	Seq        int64     // the bid's position in its auction: 1, 2, ...
}

// Value is what the bidder asked for: a proxy bid's maximum, else the
// amount.
func (b Bid) Value() decimal.Decimal {
	if b.Kind == KindProxy && b.MaxAmount.Valid {
		return b.MaxAmount.Decimal
	}
	return b.Amount
}

// BidResult is the outcome of a successful PlaceBid: a new bid, or the bid an
// earlier request with the same key created (Replayed), with the auction's
// state right after it was decided.
type BidResult struct {
	Bid      Bid
	Replayed bool
	// Leading: the bidder led once it was decided. Not, when the leader's
	// proxy answered it with an automatic bid.
	Leading      bool
	CurrentPrice decimal.Decimal
}

// SameAs reports whether r asks for what b records; a replayed key with other
// terms is an error, not a replay.
func (b Bid) SameAs(r BidRequest) bool {
	if b.BidderID != r.BidderID || b.Kind != r.Kind() {
		return false
	}
	return r.BuyNow || b.Value().Equal(r.Amount) // a buy-now's price is the auction's
}
