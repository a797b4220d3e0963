package gateway

import (
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"

	"bidgate"
)

// problem is an RFC 9457 problem document. Code is stable and meant for
// programs; Title and Detail are for people.
type problem struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail,omitempty"`
	Code         string `json:"code"`
	CurrentPrice string `json:"currentPrice,omitempty"`
	MinimumBid   string `json:"minimumBid,omitempty"`
	// RetryAfterSeconds goes into the Retry-After header of 429 and 503.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
}

func newProblem(status int, code, detail string) problem {
	return problem{Type: "urn:bidgate:problem:" + code, Title: http.StatusText(status),
		Status: status, Detail: detail, Code: code}
}

// defaultRetryAfter is what 503 answers suggest to clients, in seconds.
const defaultRetryAfter = 1

func writeProblem(ctx *fasthttp.RequestCtx, p problem) {
	ctx.Response.Header.SetContentType("application/problem+json")
	if p.Status == fasthttp.StatusServiceUnavailable || p.Status == fasthttp.StatusTooManyRequests {
		if p.RetryAfterSeconds <= 0 {
			p.RetryAfterSeconds = defaultRetryAfter
		}
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(p.RetryAfterSeconds))
	}
	b, _ := json.Marshal(p)
	ctx.SetStatusCode(p.Status)
	ctx.SetBody(b)
}

// problemFor maps an error from the shard to the answer the API promises.
// Anything unknown is logged and becomes a 500 that says nothing inside.
func problemFor(err error, log *slog.Logger) problem {
	var (
		input   *bidgate.InputError
		tooLow  *bidgate.BidTooLowError
		limited *bidgate.RateLimitedError
	)
	switch {
	case errors.As(err, &input):
		return newProblem(fasthttp.StatusBadRequest, input.Code, input.Detail)
	case errors.As(err, &tooLow):
		p := newProblem(fasthttp.StatusConflict, "bid_too_low", err.Error())
		p.CurrentPrice, p.MinimumBid = bidgate.FormatMoney(tooLow.CurrentPrice), bidgate.FormatMoney(tooLow.MinimumBid)
		return p
	case errors.As(err, &limited):
		p := newProblem(fasthttp.StatusTooManyRequests, "rate_limited", "too many bids from this bidder; retry later")
		p.RetryAfterSeconds = int(math.Ceil(limited.RetryAfter.Seconds()))
		return p
	case errors.Is(err, bidgate.ErrOverloaded):
		return newProblem(fasthttp.StatusServiceUnavailable, "overloaded", "too many bids are waiting on this auction; retry shortly")
	case errors.Is(err, bidgate.ErrAuctionNotFound):
		return newProblem(fasthttp.StatusNotFound, "auction_not_found", "no auction with this id")
	case errors.Is(err, bidgate.ErrAuctionClosed):
		return newProblem(fasthttp.StatusConflict, "auction_closed", "the auction has ended")
	case errors.Is(err, bidgate.ErrSubjectMismatch):
		return newProblem(fasthttp.StatusForbidden, "subject_mismatch",
			"the request names another user than the bearer token's subject")
	case errors.Is(err, bidgate.ErrSelfBidding):
		return newProblem(fasthttp.StatusForbidden, "self_bidding", "a seller cannot bid on their own auction")
	case errors.Is(err, bidgate.ErrIdempotencyKeyReused):
		return newProblem(fasthttp.StatusUnprocessableEntity, "idempotency_key_reused",
			"this Idempotency-Key was already used for a different bid on this auction")
	case errors.Is(err, bidgate.ErrEndTimeOutOfRange):
		return newProblem(fasthttp.StatusBadRequest, "invalid_end_time",
			"endTime must be in the future and at most 366 days ahead")
	case errors.Is(err, bidgate.ErrUnavailable):
		log.Warn("dependency unavailable", "err", err)
		return newProblem(fasthttp.StatusServiceUnavailable, "unavailable", "a data store is unavailable; retry later")
	}
	log.Error("request failed", "err", err)
	return newProblem(fasthttp.StatusInternalServerError, "internal", "internal error")
}
