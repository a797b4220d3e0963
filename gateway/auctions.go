package gateway

import (
	"strconv"
	"time"

	"github.com/shopspring/decimal"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

type createAuctionRequest struct {
	SellerID            *int64        `json:"sellerId"`
	Title               *string       `json:"title"`
	StartPrice          bidgate.Money `json:"startPrice"`
	MinIncrement        bidgate.Money `json:"minIncrement"`
	EndTime             *string       `json:"endTime"`
	Hot                 bool          `json:"hot"`
	ExtendWindowSeconds *int64        `json:"extendWindowSeconds"`
	ExtendBySeconds     *int64        `json:"extendBySeconds"`
	MaxEndTime          *string       `json:"maxEndTime"`
	ReservePrice        bidgate.Money `json:"reservePrice"`
	BuyNowPrice         bidgate.Money `json:"buyNowPrice"`
}

// toNewAuction checks presence and formats; bidgate.NewAuction.Validate
// checks the values.
func (r createAuctionRequest) toNewAuction(seller auth.Principal) (bidgate.NewAuction, error) {
	sellerID, err := actingUser(seller.UserID, r.SellerID, "sellerId", "invalid_seller_id")
	if err != nil {
		return bidgate.NewAuction{}, err
	}
	switch {
	case r.Title == nil:
		return bidgate.NewAuction{}, bidgate.InvalidInput("invalid_title", "title is required")
	case !r.StartPrice.Set:
		return bidgate.NewAuction{}, bidgate.InvalidInput("invalid_amount", "startPrice is required")
	case !r.MinIncrement.Set:
		return bidgate.NewAuction{}, bidgate.InvalidInput("invalid_amount", "minIncrement is required")
	case r.EndTime == nil:
		return bidgate.NewAuction{}, bidgate.InvalidInput("invalid_end_time", "endTime is required (RFC 3339)")
	}
	end, err := time.Parse(time.RFC3339Nano, *r.EndTime)
	if err != nil {
		return bidgate.NewAuction{}, bidgate.InvalidInput("invalid_end_time", "endTime must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	n := bidgate.NewAuction{
		SellerID: sellerID, Title: *r.Title, StartPrice: r.StartPrice.Decimal,
		// PostgreSQL keeps microseconds; truncating here makes that explicit.
		MinIncrement: r.MinIncrement.Decimal, EndTime: end.Truncate(time.Microsecond), Hot: r.Hot,
		ExtendWindow: bidgate.DefaultExtendWindow, ExtendBy: bidgate.DefaultExtendBy,
	}
	if w := r.ExtendWindowSeconds; w != nil {
		if *w < 0 || *w > int64(bidgate.MaxExtension/time.Second) {
			return n, bidgate.InvalidInput("invalid_extension", "extendWindowSeconds must be from 0 to 86400")
		}
		n.ExtendWindow = time.Duration(*w) * time.Second
	}
	if b := r.ExtendBySeconds; b != nil {
		if *b < 1 || *b > int64(bidgate.MaxExtension/time.Second) {
			return n, bidgate.InvalidInput("invalid_extension", "extendBySeconds must be from 1 to 86400")
		}
		n.ExtendBy = time.Duration(*b) * time.Second
	}
	if r.BuyNowPrice.Set {
		n.BuyNowPrice = decimal.NewNullDecimal(r.BuyNowPrice.Decimal)
	}
	if r.ReservePrice.Set {
		n.ReservePrice = decimal.NullDecimal{Decimal: r.ReservePrice.Decimal, Valid: true}
	}
	if m := r.MaxEndTime; m != nil {
		t, err := time.Parse(time.RFC3339Nano, *m)
		if err != nil {
			return n, bidgate.InvalidInput("invalid_end_time", "maxEndTime must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
		}
		n.MaxEndTime = t.Truncate(time.Microsecond)
	}
	return n, nil
}

type auctionResponse struct {
	ID           int64  `json:"id"`
	SellerID     int64  `json:"sellerId"`
	Title        string `json:"title"`
	StartPrice   string `json:"startPrice"`
	CurrentPrice string `json:"currentPrice"`
	MinIncrement string `json:"minIncrement"`
	MinimumBid   string `json:"minimumBid"`
	// LeaderID is in the seller's, operators' and the leader's own view
	// only (a nil pointer in theirs is null: nobody leads).
	LeaderID            **int64 `json:"leaderId,omitempty"`
	Leader              *string `json:"leader"` // the leader's alias, in every view
	Status              string  `json:"status"`
	EndTime             string  `json:"endTime"`
	Hot                 bool    `json:"hot"`
	BidCount            int64   `json:"bidCount"`
	ExtendWindowSeconds int64   `json:"extendWindowSeconds"`
	ExtendBySeconds     int64   `json:"extendBySeconds"`
	MaxEndTime          string  `json:"maxEndTime,omitempty"`
	ReserveMet          *bool   `json:"reserveMet,omitempty"` // only with a reserve, never its amount
	BuyNowPrice         string  `json:"buyNowPrice,omitempty"`
	CreatedAt           string  `json:"createdAt"`
}

// newAuctionResponse is the auction as its seller, operators and its
// leader see it: with the leader's id.
func newAuctionResponse(a bidgate.Auction) auctionResponse {
	r := publicAuctionResponse(a)
	var leader *int64
	if a.LeaderID != 0 {
		id := a.LeaderID
		leader = &id
	}
	r.LeaderID = &leader
	return r
}

// publicAuctionResponse is the auction as anyone sees it: the leader by
// alias only.
func publicAuctionResponse(a bidgate.Auction) auctionResponse {
	r := auctionResponse{
		ID: a.ID, SellerID: a.SellerID, Title: a.Title,
		StartPrice:   bidgate.FormatMoney(a.StartPrice),
		CurrentPrice: bidgate.FormatMoney(a.CurrentPrice),
		MinIncrement: bidgate.FormatMoney(a.MinIncrement),
		MinimumBid:   bidgate.FormatMoney(a.MinimumBid()),
		Status:       string(a.Status), EndTime: formatTime(a.EndTime), Hot: a.Mode == bidgate.ModeHot,
		BidCount:            a.BidCount,
		ExtendWindowSeconds: int64(a.ExtendWindow / time.Second),
		ExtendBySeconds:     int64(a.ExtendBy / time.Second),
		CreatedAt:           formatTime(a.CreatedAt),
	}
	if a.LeaderID != 0 && a.LeaderAlias > 0 {
		name := bidgate.AliasName(a.LeaderAlias)
		r.Leader = &name
	}
	if !a.MaxEndTime.IsZero() {
		r.MaxEndTime = formatTime(a.MaxEndTime)
	}
	if met, has := a.ReserveMet(); has {
		r.ReserveMet = &met
	}
	if a.BuyNowPrice.Valid {
		r.BuyNowPrice = bidgate.FormatMoney(a.BuyNowPrice.Decimal)
	}
	return r
}

// createAuction serves POST /auctions.
func (s *Server) createAuction(ctx *fasthttp.RequestCtx, seller auth.Principal) {
	var req createAuctionRequest
	if err := decodeJSON(ctx, &req); err != nil {
		s.writeError(ctx, err)
		return
	}
	n, err := req.toNewAuction(seller)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	a, err := s.auctions.CreateAuction(c, n)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	ctx.Response.Header.Set("Location", "/auctions/"+strconv.FormatInt(a.ID, 10))
	writeJSON(ctx, fasthttp.StatusCreated, newAuctionResponse(a))
}

// getAuction serves GET /auctions/{id}, through the node's read cache when
// there is one: the seller, operators and the leader see the leader's id,
// anyone else their alias only.
func (s *Server) getAuction(ctx *fasthttp.RequestCtx, p auth.Principal) {
	id, err := pathID(ctx, "id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	minSeq, err := minSeqOf(ctx)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	a, err := s.reads.Read(c, id, minSeq)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeAuction(ctx, a, insider(p, a))
}

// insider reports whether p sees who leads a: its seller, an operator, or
// the leader.
func insider(p auth.Principal, a bidgate.Auction) bool {
	return p.UserID != 0 && (p.UserID == a.SellerID || p.UserID == a.LeaderID || p.Can(auth.ScopeOperator))
}

// cancelRequest is the body of POST /auctions/{id}/cancel: empty, or the
// seller when authentication is off.
type cancelRequest struct {
	SellerID *int64 `json:"sellerId"`
}

// cancelAuction serves POST /auctions/{id}/cancel: the seller withdraws an
// auction before its first bid.
func (s *Server) cancelAuction(ctx *fasthttp.RequestCtx, seller auth.Principal) {
	id, err := pathID(ctx, "id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	var req cancelRequest
	if len(ctx.PostBody()) > 0 {
		if err := decodeJSON(ctx, &req); err != nil {
			s.writeError(ctx, err)
			return
		}
	}
	sellerID, err := actingUser(seller.UserID, req.SellerID, "sellerId", "invalid_seller_id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	a, err := s.auctions.Cancel(c, id, sellerID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, newAuctionResponse(a))
}

// promote serves POST /auctions/{id}/promote, an operator's call: the
// auction moves to the hot path now.
func (s *Server) promote(ctx *fasthttp.RequestCtx, _ auth.Principal) {
	id, err := pathID(ctx, "id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	a, err := s.auctions.Promote(c, id, "operator")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, newAuctionResponse(a))
}
