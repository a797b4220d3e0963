package gateway

import (
	"context"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

// History reads bid histories and users' bids (the shard, on PostgreSQL or
// its read replica).
type History interface {
	AuctionBids(ctx context.Context, id, before int64, limit int) (bidgate.HistoryPage, error)
	MyBids(ctx context.Context, q bidgate.MyBidsQuery) (bidgate.MyBidsPage, error)
}

// The listings a cursor is sealed for: one listing's cursor is refused by
// another.
const (
	cursorAuctionBids = "auction-bids"
	cursorMyBids      = "my-bids"
)

type historyEntry struct {
	Seq       int64  `json:"seq"`
	Bidder    string `json:"bidder"`
	BidderID  *int64 `json:"bidderId,omitempty"` // the seller's and operators' view, and one's own rows
	You       bool   `json:"you,omitempty"`
	Amount    string `json:"amount"`
	MaxAmount string `json:"maxAmount,omitempty"` // one's own proxy rows only
	Kind      string `json:"kind"`
	At        string `json:"at"`
}

type historyPage struct {
	Items      []historyEntry `json:"items"`
	NextCursor *string        `json:"nextCursor"`
}

// auctionBids serves GET /auctions/{id}/bids: the public sees aliases; the
// seller and operators see ids too; a bidder sees their own rows marked,
// with their own maxima.
func (s *Server) auctionBids(ctx *fasthttp.RequestCtx, p auth.Principal) {
	if s.history == nil {
		s.writeError(ctx, errNoRoute)
		return
	}
	id, err := pathID(ctx, "id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	q, err := readQuery(ctx, "limit", "cursor")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	limit, err := q.limit()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	var before int64
	if c, ok := q["cursor"]; ok {
		f, err := s.cursors.OpenInts(cursorAuctionBids, c, 2)
		if err != nil || f[0] != id || f[1] < 1 {
			s.writeError(ctx, errInvalidCursor)
			return
		}
		before = f[1]
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	page, err := s.history.AuctionBids(c, id, before, limit)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	insider := p.UserID != 0 && (p.UserID == page.SellerID || p.Can(auth.ScopeOperator))
	out := historyPage{Items: make([]historyEntry, 0, len(page.Entries))}
	for _, e := range page.Entries {
		h := historyEntry{Seq: e.Seq, Bidder: bidgate.AliasName(e.Alias), Amount: bidgate.FormatMoney(e.Amount),
			Kind: string(e.Kind), At: formatTime(e.AcceptedAt)}
		own := p.UserID != 0 && e.BidderID == p.UserID
		if insider || own {
			bidder := e.BidderID
			h.BidderID = &bidder
		}
		if own {
			h.You = true
			if e.MaxAmount.Valid {
				h.MaxAmount = bidgate.FormatMoney(e.MaxAmount.Decimal)
			}
		}
		out.Items = append(out.Items, h)
	}
	if page.More {
		next := s.cursors.SealInts(cursorAuctionBids, id, page.Entries[len(page.Entries)-1].Seq)
		out.NextCursor = &next
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// myBidAuction is what /me/bids shows of an auction: never its leader or
// anyone's maximum.
type myBidAuction struct {
	ID           int64  `json:"id"`
	Title        string `json:"title"`
	Status       string `json:"status"`
	CurrentPrice string `json:"currentPrice"`
	MinimumBid   string `json:"minimumBid"`
	EndTime      string `json:"endTime"`
	Hot          bool   `json:"hot"`
	BidCount     int64  `json:"bidCount"`
}

type myBid struct {
	Auction    myBidAuction `json:"auction"`
	HighestBid string       `json:"highestBid"`
	MaxAmount  string       `json:"maxAmount,omitempty"`
	State      string       `json:"state"`
}

type myBidsPage struct {
	Items      []myBid `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

// myBids serves GET /me/bids: the auctions the caller bid on, newest
// first, with where they stand in each.
func (s *Server) myBids(ctx *fasthttp.RequestCtx, p auth.Principal) {
	if s.history == nil {
		s.writeError(ctx, errNoRoute)
		return
	}
	q, err := readQuery(ctx, "limit", "cursor", "state", "userId")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	mq := bidgate.MyBidsQuery{UserID: p.UserID}
	if mq.Limit, err = q.limit(); err != nil {
		s.writeError(ctx, err)
		return
	}
	if mq.UserID, err = q.user(p.UserID); err != nil {
		s.writeError(ctx, err)
		return
	}
	state := 0 // 0: all; else 1 + its index in bidgate.MyBidStates
	if v, ok := q["state"]; ok {
		i := slices.Index(bidgate.MyBidStates, bidgate.MyBidState(v))
		if i < 0 {
			s.writeError(ctx, bidgate.InvalidInput("invalid_query", "state must be one of leading, outbid, won, lost, cancelled"))
			return
		}
		mq.State, state = bidgate.MyBidStates[i], i+1
	}
	if c, ok := q["cursor"]; ok {
		f, err := s.cursors.OpenInts(cursorMyBids, c, 3)
		if err != nil || f[0] != mq.UserID || f[1] != int64(state) || f[2] < 1 {
			s.writeError(ctx, errInvalidCursor)
			return
		}
		mq.Before = f[2]
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	page, err := s.history.MyBids(c, mq)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	out := myBidsPage{Items: make([]myBid, 0, len(page.Items))}
	for _, m := range page.Items {
		a := m.Auction
		item := myBid{Auction: myBidAuction{ID: a.ID, Title: a.Title, Status: string(a.Status),
			CurrentPrice: bidgate.FormatMoney(a.CurrentPrice), MinimumBid: bidgate.FormatMoney(a.MinimumBid()),
			EndTime: formatTime(a.EndTime), Hot: a.Mode == bidgate.ModeHot, BidCount: a.BidCount},
			HighestBid: bidgate.FormatMoney(m.Highest), State: string(m.State)}
		if m.MaxAmount.Valid {
			item.MaxAmount = bidgate.FormatMoney(m.MaxAmount.Decimal)
		}
		out.Items = append(out.Items, item)
	}
	if page.Next != 0 {
		next := s.cursors.SealInts(cursorMyBids, mq.UserID, int64(state), page.Next)
		out.NextCursor = &next
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// query is a request's query parameters, each given at most once.
type query map[string]string

// readQuery reads the query, refusing a parameter not in allowed or given
// twice (400 invalid_query naming it).
func readQuery(ctx *fasthttp.RequestCtx, allowed ...string) (query, error) {
	q := query{}
	for k, v := range ctx.QueryArgs().All() {
		name := string(k)
		if !slices.Contains(allowed, name) {
			return nil, bidgate.InvalidInput("invalid_query", "unknown query parameter "+quoted(name))
		}
		if _, dup := q[name]; dup {
			return nil, bidgate.InvalidInput("invalid_query", name+" is given more than once")
		}
		q[name] = string(v)
	}
	return q, nil
}

// limit is the page size asked for: 1 to bidgate.MaxPageSize, by default
// bidgate.DefaultPageSize.
func (q query) limit() (int, error) {
	v, ok := q["limit"]
	if !ok {
		return bidgate.DefaultPageSize, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > bidgate.MaxPageSize || strconv.Itoa(n) != v {
		return 0, bidgate.InvalidInput("invalid_query", "limit must be an integer from 1 to "+strconv.Itoa(bidgate.MaxPageSize)+", got "+quoted(v))
	}
	return n, nil
}

// user is whose bids are read: the token's subject; with authentication
// off (subject 0), the userId parameter, which is refused otherwise.
func (q query) user(subject int64) (int64, error) {
	v, named := q["userId"]
	switch {
	case subject != 0 && named:
		return 0, bidgate.InvalidInput("invalid_query", "userId is only taken when authentication is off: the token names the user")
	case subject != 0:
		return subject, nil
	case !named:
		return 0, bidgate.InvalidInput("invalid_query", "userId is required when authentication is off")
	}
	id, err := bidgate.ParseID(v)
	if err != nil {
		return 0, bidgate.InvalidInput("invalid_query", "userId: "+err.Error())
	}
	return id, nil
}

// quoted shows a client's value in a detail, cut short.
func quoted(s string) string {
	if len(s) > 24 {
		s = s[:24] + "..."
	}
	return strconv.Quote(s)
}
