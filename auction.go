// Package bidgate holds the domain types every part of the auction backend
// shares: auctions, bids, amounts and the outcomes of placing a bid.
//
// The roles live in their own packages (gateway, shard, persist, ...); this
// package imports none of them.
package bidgate

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// Status is an auction's life-cycle state. An auction past its end time stays
// OPEN until the closer settles it; bids are refused by the end-time check
// itself, not by the status.
type Status string

const (
	StatusOpen      Status = "OPEN"
	StatusClosed    Status = "CLOSED"
	StatusCancelled Status = "CANCELLED" // by its seller, before any bid
)

// Final reports whether the status never changes again.
func (s Status) Final() bool { return s == StatusClosed || s == StatusCancelled }

// Mode says which store serializes an auction's bids: PostgreSQL (cold) or
// Redis (hot).
type Mode string

const (
	ModeCold Mode = "COLD"
	ModeHot  Mode = "HOT"
)

// Defaults and bounds of an auction's settings.
const (
	DefaultExtendWindow = 2 * time.Minute
	DefaultExtendBy     = 2 * time.Minute
	MaxExtension        = 24 * time.Hour
	MaxTitleLength      = 200
	// MaxAuctionDuration bounds how far in the future an auction may end.
	MaxAuctionDuration = 366 * 24 * time.Hour
)

// Auction is the current state of one auction.
type Auction struct {
	ID           int64
	SellerID     int64
	Title        string
	StartPrice   decimal.Decimal
	CurrentPrice decimal.Decimal
	MinIncrement decimal.Decimal
	LeaderID     int64 // 0 while nobody has bid
	// LeaderAlias is the leader's public name, "Bidder <LeaderAlias>": their
	// rank by first accepted row in the auction. 0: nobody leads, or not
	// known (then public views show no leader name).
	LeaderAlias  int64
	Status       Status
	Mode         Mode
	EndTime      time.Time
	ExtendWindow time.Duration
	ExtendBy     time.Duration
	MaxEndTime   time.Time // anti-sniping never extends past it; zero: no cap
	// ReservePrice is hidden: only whether it is met is ever shown.
	ReservePrice decimal.NullDecimal
	// LeaderMax is the leader's hidden maximum (their amount, for a straight
	// bid); never shown. Zero while nobody leads.
	LeaderMax   decimal.Decimal
	BuyNowPrice decimal.NullDecimal // allowed while BidCount is 0
	BidCount    int64
	CreatedAt   time.Time
}

// ReserveMet reports whether the auction has a reserve and whether its
// leader's bid reaches it; an auction that ends below it has no winner.
func (a Auction) ReserveMet() (met, has bool) {
	if !a.ReservePrice.Valid {
		return false, false
	}
	return a.LeaderID != 0 && a.CurrentPrice.GreaterThanOrEqual(a.ReservePrice.Decimal), true
}

// MinimumBid is the lowest amount the auction accepts next.
func (a Auction) MinimumBid() decimal.Decimal {
	return a.CurrentPrice.Add(a.MinIncrement)
}

// NewAuction is what a seller asks for. Validate it before use.
type NewAuction struct {
	SellerID     int64
	Title        string
	StartPrice   decimal.Decimal
	MinIncrement decimal.Decimal
	EndTime      time.Time
	Hot          bool
	ExtendWindow time.Duration
	ExtendBy     time.Duration
	MaxEndTime   time.Time           // optional cap of anti-sniping extensions; after EndTime
	ReservePrice decimal.NullDecimal // optional, at least StartPrice
	// BuyNowPrice is optional, at least StartPrice + MinIncrement and the
	// reserve.
	BuyNowPrice decimal.NullDecimal
}

// Validate checks everything that does not need a clock; whether EndTime lies
// in the future is decided by the store, with its own time.
func (n *NewAuction) Validate() error {
	if n.SellerID <= 0 {
		return InvalidInput("invalid_seller_id", "sellerId must be a positive integer")
	}
	n.Title = strings.TrimSpace(n.Title)
	if err := validateTitle(n.Title); err != nil {
		return err
	}
	if err := CheckMoney("startPrice", n.StartPrice, true); err != nil {
		return err
	}
	if err := CheckMoney("minIncrement", n.MinIncrement, false); err != nil {
		return err
	}
	if n.StartPrice.Add(n.MinIncrement).GreaterThan(MaxAmount) {
		return InvalidInput("invalid_amount", "startPrice + minIncrement exceeds the largest amount "+MaxAmount.StringFixed(2))
	}
	if r := n.ReservePrice; r.Valid {
		if err := CheckMoney("reservePrice", r.Decimal, false); err != nil {
			return err
		}
		if r.Decimal.LessThan(n.StartPrice) {
			return InvalidInput("invalid_amount", "reservePrice must be at least startPrice")
		}
	}
	if b := n.BuyNowPrice; b.Valid {
		if err := CheckMoney("buyNowPrice", b.Decimal, false); err != nil {
			return err
		}
		if b.Decimal.LessThan(n.StartPrice.Add(n.MinIncrement)) || n.ReservePrice.Valid && b.Decimal.LessThan(n.ReservePrice.Decimal) {
			return InvalidInput("invalid_amount", "buyNowPrice must be at least startPrice + minIncrement and the reservePrice")
		}
	}
	if n.EndTime.IsZero() {
		return InvalidInput("invalid_end_time", "endTime is required (RFC 3339)")
	}
	if !n.MaxEndTime.IsZero() && !n.MaxEndTime.After(n.EndTime) {
		return InvalidInput("invalid_end_time", "maxEndTime must be after endTime")
	}
	// The anti-sniping extension must be at least a second: a bid accepted in
	// the last instant then always ends before the extended end.
	if n.ExtendWindow < 0 || n.ExtendWindow > MaxExtension || n.ExtendWindow%time.Second != 0 {
		return InvalidInput("invalid_extension", "extendWindowSeconds must be a whole number from 0 to 86400")
	}
	if n.ExtendBy < time.Second || n.ExtendBy > MaxExtension || n.ExtendBy%time.Second != 0 {
		return InvalidInput("invalid_extension", "extendBySeconds must be a whole number from 1 to 86400")
	}
	return nil
}

func validateTitle(title string) error {
	n := utf8.RuneCountInString(title)
	if n == 0 || n > MaxTitleLength {
		return InvalidInput("invalid_title", fmt.Sprintf("title must be 1 to %d characters after trimming white space", MaxTitleLength))
	}
	if !utf8.ValidString(title) {
		return InvalidInput("invalid_title", "title must be valid UTF-8")
	}
	for _, r := range title {
		if unicode.IsControl(r) {
			return InvalidInput("invalid_title", "title must not contain control characters")
		}
	}
	return nil
}
