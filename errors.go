package bidgate

import (
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"
)

// Errors a bid or an auction request can end in. The gateway maps each to an
// HTTP status and a stable problem code.
var (
	ErrAuctionNotFound      = errors.New("auction not found")
	ErrAuctionClosed        = errors.New("auction closed")
	ErrBidTooLow            = errors.New("bid too low")
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different bid")
	ErrEndTimeOutOfRange    = errors.New("end time out of range")
	ErrRateLimited          = errors.New("rate limited")
	// ErrSubjectMismatch: a body names another user than the token's.
	ErrSubjectMismatch = errors.New("subject mismatch")
	// ErrSelfBidding: a seller bid on their own auction.
	ErrSelfBidding = errors.New("seller bidding on own auction")
	// ErrHasBids: a seller may cancel an auction only before its first bid.
	ErrHasBids = errors.New("auction has bids")
	// ErrForbidden: the caller may not do this to this auction (another
	// user's auction).
	ErrForbidden = errors.New("forbidden")
	// ErrAlreadyLeading: the leader placed a straight bid; only a proxy bid
	// with a higher maximum changes anything for them.
	ErrAlreadyLeading = errors.New("already leading")
	// ErrMaxNotRaised: the leader's proxy bid is not above their maximum.
	ErrMaxNotRaised = errors.New("maximum not raised")
	// ErrBuyNowUnavailable: the auction has no buy-now price, or a bid was
	// accepted already.
	ErrBuyNowUnavailable = errors.New("buy-now unavailable")
	// ErrOverloaded: too many requests wait on one auction; retry shortly.
	ErrOverloaded = errors.New("overloaded")
	// ErrNoticeNotFound: a notice id names no notice of the user who gave
	// it. Another user's notice is not found either: nobody learns whether
	// an id exists for someone else.
	ErrNoticeNotFound = errors.New("notice not found")
)

// RateLimitedError says when the bidder may bid again.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited: retry after %v", e.RetryAfter)
}

func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// BidTooLowError tells the bidder what it would take.
type BidTooLowError struct {
	CurrentPrice decimal.Decimal
	MinimumBid   decimal.Decimal
}

func (e *BidTooLowError) Error() string {
	return "bid too low: current price " + FormatMoney(e.CurrentPrice) + ", minimum bid " + FormatMoney(e.MinimumBid)
}

func (e *BidTooLowError) Is(target error) bool { return target == ErrBidTooLow }

// InputError is a client mistake found before anything was changed.
type InputError struct {
	Code   string // stable, machine-readable
	Detail string
}

func (e *InputError) Error() string { return e.Detail }

// InvalidInput returns an *InputError.
func InvalidInput(code, detail string) error { return &InputError{Code: code, Detail: detail} }

// ErrUnavailable wraps failures of a store (PostgreSQL, Redis) that is down or
// too slow: the request may be retried later.
var ErrUnavailable = errors.New("dependency unavailable")

// TimeoutError says a store did not answer within the budget of the call
// (or cancelled the call at its own limit). It is an ErrUnavailable: the
// request may be retried, and a retry with the same key is always right.
//
// Undecided tells what a client may conclude: true only when the store is
// known to have dropped the request (PostgreSQL cancelled the statement and
// rolled it back), so a retry decides afresh; false when the request may
// still be carried out after the answer (a Redis script sent to a stalled
// server runs once it wakes), and a retry with the same key learns its
// outcome.
type TimeoutError struct {
	Undecided bool
	Err       error
}

func (e *TimeoutError) Error() string {
	if e.Undecided {
		return fmt.Sprintf("store timed out, request not carried out: %v", e.Err)
	}
	return fmt.Sprintf("store timed out, request may still be carried out: %v", e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

func (e *TimeoutError) Is(target error) bool { return target == ErrUnavailable }
