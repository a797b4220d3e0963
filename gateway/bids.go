package gateway

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

type bidRequest struct {
	BidderID *int64 `json:"bidderId"` // optional: the bidder is the token's subject
	// Exactly one: a straight bid's amount, or a proxy bid's maximum.
	Amount    bidgate.Money `json:"amount"`
	MaxAmount bidgate.Money `json:"maxAmount"`
}

type bidResponse struct {
	AuctionID int64  `json:"auctionId"`
	BidderID  int64  `json:"bidderId"`
	Kind      string `json:"kind"`
	// Amount is the bid's row: what a proxy bid stood at once decided.
	Amount       string `json:"amount"`
	MaxAmount    string `json:"maxAmount,omitempty"` // the bidder's own maximum, to them only
	Leading      bool   `json:"leading"`
	CurrentPrice string `json:"currentPrice"`
	RequestID    string `json:"requestId"`
	AcceptedAt   string `json:"acceptedAt"`
	EndTime      string `json:"endTime"`
	Seq          int64  `json:"seq"`
}

func newBidResponse(r bidgate.BidResult) bidResponse {
	b := r.Bid
	resp := bidResponse{AuctionID: b.AuctionID, BidderID: b.BidderID, Kind: string(b.Kind), Amount: bidgate.FormatMoney(b.Amount),
		Leading: r.Leading, CurrentPrice: bidgate.FormatMoney(r.CurrentPrice),
		RequestID: b.RequestID.String(), AcceptedAt: formatTime(b.AcceptedAt), EndTime: formatTime(b.EndTime), Seq: b.Seq}
	if b.MaxAmount.Valid {
		resp.MaxAmount = bidgate.FormatMoney(b.MaxAmount.Decimal)
	}
	return resp
}

// idempotencyKey reads the required Idempotency-Key header: a UUID in its
// canonical 36-character form, any case.
func idempotencyKey(ctx *fasthttp.RequestCtx) (uuid.UUID, error) {
	return parseKey(ctx.Request.Header.Peek("Idempotency-Key"))
}

// parseKey reads an Idempotency-Key's value.
func parseKey(h []byte) (uuid.UUID, error) {
	if len(h) == 0 {
		return uuid.Nil, bidgate.InvalidInput("missing_idempotency_key", "the Idempotency-Key header (a UUID) is required")
	}
	id, err := uuid.ParseBytes(h)
	if err != nil || len(h) != 36 || id == uuid.Nil {
		return uuid.Nil, bidgate.InvalidInput("invalid_idempotency_key", "Idempotency-Key must be a UUID such as 3f1c7a52-8a3e-4c2b-9d43-2b8f0e6a9c11")
	}
	return id, nil
}

// auctionAndKey reads the auction id of the path and the Idempotency-Key.
func auctionAndKey(ctx *fasthttp.RequestCtx) (int64, uuid.UUID, error) {
	auctionID, err := pathID(ctx, "id")
	if err != nil {
		return 0, uuid.Nil, err
	}
	key, err := idempotencyKey(ctx)
	return auctionID, key, err
}

// parseBid turns a request by bidder (0 when authentication is off: the
// body names them) into a BidRequest, or an error: an *InputError,
// ErrSubjectMismatch.
func parseBid(ctx *fasthttp.RequestCtx, bidder int64) (bidgate.BidRequest, error) {
	auctionID, key, err := auctionAndKey(ctx)
	if err != nil {
		return bidgate.BidRequest{}, err
	}
	return readBid(auctionID, key, bidder, ctx.PostBody())
}

// readBid is parseBid once the path and the key are read: the bid whose
// request body is body.
func readBid(auctionID int64, key uuid.UUID, bidder int64, b []byte) (bidgate.BidRequest, error) {
	var body bidRequest
	if err := decodeBody(b, &body); err != nil {
		return bidgate.BidRequest{}, err
	}
	bidder, err := actingUser(bidder, body.BidderID, "bidderId", "invalid_bidder_id")
	if err != nil {
		return bidgate.BidRequest{}, err
	}
	if body.Amount.Set == body.MaxAmount.Set {
		return bidgate.BidRequest{}, bidgate.InvalidInput("invalid_amount",
			"give exactly one of amount (a straight bid) and maxAmount (a proxy bid)")
	}
	r := bidgate.BidRequest{AuctionID: auctionID, BidderID: bidder, Amount: body.Amount.Decimal, RequestID: key}
	if body.MaxAmount.Set {
		r.Amount, r.Proxy = body.MaxAmount.Decimal, true
	}
	// Checked here too (the shard's PlaceBid checks again): an invalid
	// bid is refused before it is forwarded to another node.
	return r, r.Validate()
}

// placeClientBid serves POST /auctions/{id}/bids: the bidder is the
// token's subject.
func (s *Server) placeClientBid(ctx *fasthttp.RequestCtx, p auth.Principal) {
	s.placeBid(ctx, p.UserID)
}

// placeBid decides, or forwards to the auction's owner, a bid by bidder.
func (s *Server) placeBid(ctx *fasthttp.RequestCtx, bidder int64) {
	outcome := "invalid"
	defer s.observeBid(time.Now(), &outcome)
	r, err := parseBid(ctx, bidder)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if s.forwarder != nil && ctx.UserValue(forwardedKey) == nil {
		if forwarded, err := s.forwarder.forward(ctx, r); forwarded {
			if err != nil {
				s.writeError(ctx, err)
			}
			outcome = "forwarded"
			return
		}
	}
	outcome = s.decideBid(ctx, r)
}

// decideBid has this node's shard decide r and writes the answer; it
// returns the outcome for metrics.
func (s *Server) decideBid(ctx *fasthttp.RequestCtx, r bidgate.BidRequest) string {
	ctx.Response.Header.Set(headerNode, s.cfg.NodeID)
	// No timer of the request's own: the shard bounds a bid's store calls
	// by --store-timeout, checked at start to be below --request-timeout.
	// One here made the shard's its child, and the two cost 1 % of a
	// node's CPU.
	res, err := s.auctions.PlaceBid(context.Background(), r)
	if err != nil {
		s.writeError(ctx, err)
		return bidOutcome(res, err)
	}
	status := fasthttp.StatusCreated
	if res.Replayed {
		status = fasthttp.StatusOK
	}
	writeJSON(ctx, status, newBidResponse(res))
	return bidOutcome(res, nil)
}

// observeBid counts a bid (or buy-now) request by its outcome.
func (s *Server) observeBid(start time.Time, outcome *string) {
	s.metrics.bids.WithLabelValues(*outcome).Inc()
	s.metrics.bidDuration.WithLabelValues(*outcome).Observe(time.Since(start).Seconds())
}

// buyNowRequest is the body of POST /auctions/{id}/buy-now: empty, or the
// buyer when authentication is off.
type buyNowRequest struct {
	BidderID *int64 `json:"bidderId"`
}

// buyNow serves POST /auctions/{id}/buy-now: the token's subject buys the
// auction at its buy-now price while no bid has been accepted. Any node
// serves it: the store that serializes the auction's bids decides it.
func (s *Server) buyNow(ctx *fasthttp.RequestCtx, p auth.Principal) {
	outcome := "invalid"
	defer s.observeBid(time.Now(), &outcome)
	r, err := parseBuyNow(ctx, p.UserID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	outcome = s.decideBid(ctx, r)
}

func parseBuyNow(ctx *fasthttp.RequestCtx, buyer int64) (bidgate.BidRequest, error) {
	auctionID, key, err := auctionAndKey(ctx)
	if err != nil {
		return bidgate.BidRequest{}, err
	}
	var body buyNowRequest
	if len(bytes.TrimSpace(ctx.PostBody())) > 0 {
		if err := decodeJSON(ctx, &body); err != nil {
			return bidgate.BidRequest{}, err
		}
	}
	if buyer, err = actingUser(buyer, body.BidderID, "bidderId", "invalid_bidder_id"); err != nil {
		return bidgate.BidRequest{}, err
	}
	return bidgate.BidRequest{AuctionID: auctionID, BidderID: buyer, BuyNow: true, RequestID: key}, nil
}

// bidOutcome names a bid's result for metrics.
func bidOutcome(res bidgate.BidResult, err error) string {
	var input *bidgate.InputError
	switch {
	case err == nil && res.Replayed:
		return "replayed"
	case err == nil:
		return "accepted"
	case errors.Is(err, bidgate.ErrBidTooLow):
		return "too_low"
	case errors.Is(err, bidgate.ErrAuctionClosed):
		return "closed"
	case errors.Is(err, bidgate.ErrAlreadyLeading):
		return "already_leading"
	case errors.Is(err, bidgate.ErrMaxNotRaised):
		return "max_not_raised"
	case errors.Is(err, bidgate.ErrBuyNowUnavailable):
		return "buy_now_unavailable"
	case errors.Is(err, bidgate.ErrIdempotencyKeyReused):
		return "key_reused"
	case errors.Is(err, bidgate.ErrSubjectMismatch), errors.Is(err, bidgate.ErrSelfBidding):
		return "forbidden"
	case errors.Is(err, bidgate.ErrAuctionNotFound):
		return "not_found"
	case errors.As(err, &input):
		return "invalid"
	case errors.Is(err, bidgate.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, bidgate.ErrOverloaded):
		return "overloaded"
	case errors.As(err, new(*bidgate.TimeoutError)):
		return "store_timeout"
	case errors.Is(err, bidgate.ErrUnavailable):
		return "unavailable"
	}
	return "error"
}
