package gateway

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/valyala/fasthttp"

	"bidgate"
)

// TestBidOutcomeNamesEveryRefusal: every answer a bid can get has its own
// outcome, and only what the API answers with a 500 counts as "error". A
// proxy bidder raising while leading once counted as an error, 1 % of a
// flash sale's bids, and left the latency objective.
func TestBidOutcomeNamesEveryRefusal(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "accepted"},
		{&bidgate.BidTooLowError{}, "too_low"},
		{bidgate.ErrAuctionClosed, "closed"},
		{bidgate.ErrAlreadyLeading, "already_leading"},
		{bidgate.ErrMaxNotRaised, "max_not_raised"},
		{bidgate.ErrBuyNowUnavailable, "buy_now_unavailable"},
		{bidgate.ErrIdempotencyKeyReused, "key_reused"},
		{bidgate.ErrSubjectMismatch, "forbidden"},
		{bidgate.ErrSelfBidding, "forbidden"},
		{bidgate.ErrAuctionNotFound, "not_found"},
		{bidgate.InvalidInput("invalid_amount", "no"), "invalid"},
		{&bidgate.RateLimitedError{}, "rate_limited"},
		{bidgate.ErrOverloaded, "overloaded"},
		{&bidgate.TimeoutError{Err: fmt.Errorf("slow")}, "store_timeout"},
		{fmt.Errorf("redis: %w", bidgate.ErrUnavailable), "unavailable"},
		{fmt.Errorf("a bug"), "error"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := bidOutcome(bidgate.BidResult{}, tt.err); got != tt.want {
				t.Errorf("bidOutcome(%v) = %q, want %q", tt.err, got, tt.want)
			}
			internal := tt.err != nil && problemFor(tt.err, slog.New(slog.DiscardHandler)).Status == fasthttp.StatusInternalServerError
			if internal != (tt.want == "error") {
				t.Errorf("%v: answered as a 500: %v, counted as an error: %v", tt.err, internal, tt.want == "error")
			}
		})
	}
}
