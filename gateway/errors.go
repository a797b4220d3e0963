package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"

	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/problem"
)

// writeError answers ctx with the problem err stands for: every error
// answer of the gateway goes through here.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, err error) {
	problem.Write(ctx, problemFor(err, s.log))
}

// refusal is an error that carries its own answer: what the gateway refuses
// by itself (no such route, a missing token, a bad signature), where no
// store had a say.
type refusal struct{ problem problem.Problem }

// refuse is the refusal answered with status, code and detail.
func refuse(status int, code, detail string) *refusal {
	return &refusal{problem: problem.New(status, code, detail)}
}

func (r *refusal) Error() string { return r.problem.Code + ": " + r.problem.Detail }

// The refusals that say the same every time.
var (
	errNoRoute          = refuse(fasthttp.StatusNotFound, "route_not_found", "no such route")
	errMethodNotAllowed = refuse(fasthttp.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
	errInternal         = refuse(fasthttp.StatusInternalServerError, "internal", "internal error")
)

// problemFor maps an error to the answer the API promises. Anything unknown
// is logged and becomes a 500 that says nothing inside.
func problemFor(err error, log *slog.Logger) problem.Problem {
	var (
		refused *refusal
		input   *bidgate.InputError
		tooLow  *bidgate.BidTooLowError
		limited *bidgate.RateLimitedError
		timeout *bidgate.TimeoutError
	)
	switch {
	case errors.As(err, &refused):
		return refused.problem
	case errors.As(err, &input):
		return problem.New(fasthttp.StatusBadRequest, input.Code, input.Detail)
	case errors.As(err, &tooLow):
		p := problem.New(fasthttp.StatusConflict, "bid_too_low", err.Error())
		p.CurrentPrice, p.MinimumBid = bidgate.FormatMoney(tooLow.CurrentPrice), bidgate.FormatMoney(tooLow.MinimumBid)
		return p
	case errors.As(err, &limited):
		p := problem.New(fasthttp.StatusTooManyRequests, "rate_limited", "too many bids from this bidder; retry later")
		p.RetryAfterSeconds = int(math.Ceil(limited.RetryAfter.Seconds()))
		return p
	case errors.Is(err, bidgate.ErrOverloaded):
		return problem.New(fasthttp.StatusServiceUnavailable, "overloaded", "too many bids are waiting on this auction; retry shortly")
	case errors.Is(err, bidgate.ErrAuctionNotFound):
		return problem.New(fasthttp.StatusNotFound, "auction_not_found", "no auction with this id")
	case errors.Is(err, bidgate.ErrNoticeNotFound):
		return problem.New(fasthttp.StatusNotFound, "notice_not_found", "you have no notice with this id")
	case errors.Is(err, bidgate.ErrAuctionClosed):
		return problem.New(fasthttp.StatusConflict, "auction_closed", "the auction has ended")
	case errors.Is(err, bidgate.ErrSubjectMismatch):
		return problem.New(fasthttp.StatusForbidden, "subject_mismatch",
			"the request names another user than the bearer token's subject")
	case errors.Is(err, bidgate.ErrHasBids):
		return problem.New(fasthttp.StatusConflict, "has_bids", "the auction has bids: it can no longer be cancelled")
	case errors.Is(err, bidgate.ErrForbidden):
		return problem.New(fasthttp.StatusForbidden, "forbidden", "only the auction's seller may do this")
	case errors.Is(err, bidgate.ErrAlreadyLeading):
		return problem.New(fasthttp.StatusConflict, "already_leading",
			"you lead this auction already; only a proxy bid with a higher maximum changes anything")
	case errors.Is(err, bidgate.ErrMaxNotRaised):
		return problem.New(fasthttp.StatusConflict, "max_not_raised", "a new maximum must be above your current one")
	case errors.Is(err, bidgate.ErrBuyNowUnavailable):
		return problem.New(fasthttp.StatusConflict, "buy_now_unavailable",
			"this auction has no buy-now price, or a bid was accepted already")
	case errors.Is(err, bidgate.ErrSelfBidding):
		return problem.New(fasthttp.StatusForbidden, "self_bidding", "a seller cannot bid on their own auction")
	case errors.Is(err, bidgate.ErrIdempotencyKeyReused):
		return problem.New(fasthttp.StatusUnprocessableEntity, "idempotency_key_reused",
			"this Idempotency-Key was already used for a different bid on this auction")
	case errors.Is(err, bidgate.ErrEndTimeOutOfRange):
		return problem.New(fasthttp.StatusBadRequest, "invalid_end_time",
			"endTime must be in the future and at most 366 days ahead")
	case errors.As(err, &timeout):
		log.Warn("store timed out", "err", err)
		if timeout.Undecided {
			return problem.New(fasthttp.StatusServiceUnavailable, "store_timeout",
				"a data store did not answer in time; the request was not carried out: retry later")
		}
		return problem.New(fasthttp.StatusServiceUnavailable, "store_timeout",
			"a data store did not answer in time; the request may still be carried out: retry with the same Idempotency-Key to learn its outcome")
	case errors.Is(err, bidgate.ErrUnavailable):
		log.Warn("dependency unavailable", "err", err)
		return problem.New(fasthttp.StatusServiceUnavailable, "unavailable", "a data store is unavailable; retry later")
	}
	log.Error("request failed", "err", err)
	return errInternal.problem
}

// answerPanic answers a request whose handler panicked with a 500, after
// logging the panic and its stack.
func (s *Server) answerPanic(ctx *fasthttp.RequestCtx, v any) {
	s.metrics.panics.Inc()
	s.log.Error("panic serving request", "method", string(ctx.Method()), "path", string(ctx.Path()),
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	ctx.Response.Reset()
	s.writeError(ctx, errInternal)
}

// answerTransportError answers what fasthttp rejects before any handler
// runs, such as an oversized body or a malformed request, with a fixed
// message chosen by the error's kind: the request's bytes (its headers,
// tokens, cookies) are never echoed. fasthttp's Logger (fasthttpLogger)
// logs and counts the same error afterwards.
func (s *Server) answerTransportError(ctx *fasthttp.RequestCtx, err error) {
	switch transportErrorKind(err) {
	case kindBodyTooLarge:
		s.writeError(ctx, refuse(fasthttp.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBodyBytes)))
	case kindHeaderTooLarge:
		s.writeError(ctx, refuse(fasthttp.StatusRequestHeaderFieldsTooLarge, "header_too_large",
			"the request line and headers exceed the server's read buffer"))
	case kindTimeout:
		s.writeError(ctx, refuse(fasthttp.StatusRequestTimeout, "request_timeout", "the request did not arrive in time"))
	default:
		s.writeError(ctx, refuse(fasthttp.StatusBadRequest, "malformed_request", "the request is not valid HTTP/1.1"))
	}
}
