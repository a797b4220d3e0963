package gateway

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shopspring/decimal"
	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

// Lister reads pages of auction lists (the shard, from the read replica
// when one serves). Auctions that are not Listers serve no list routes.
type Lister interface {
	ListAuctions(ctx context.Context, q bidgate.ListQuery) (bidgate.ListPage, error)
}

// Bounds of the list parameters.
const (
	defaultListLimit = 20
	maxQueryLength   = 200 // characters of q, as a title's
)

// listRoute is what one list route accepts and defaults to.
type listRoute struct {
	name        string          // the cursor's scope: a cursor of one route never opens on another
	params      map[string]bool // the query parameters it takes
	sort        bidgate.ListSort
	status      bidgate.Status // "": every status
	sellerParam bool           // sellerId filters (public) rather than names the caller (auth off)
}

var (
	publicList = listRoute{name: "auctions", sort: bidgate.SortEnding, status: bidgate.StatusOpen, sellerParam: true,
		params: paramSet("status", "sellerId", "q", "endingAfter", "endingBefore", "hot", "sort", "limit", "cursor")}
	myList = listRoute{name: "me/auctions", sort: bidgate.SortNewest,
		params: paramSet("status", "sellerId", "q", "endingAfter", "endingBefore", "hot", "sort", "limit", "cursor")}
)

func paramSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// listRequest is a list route's parsed query.
type listRequest struct {
	query    bidgate.ListQuery
	sellerID *int64 // sellerId as given
	cursor   string
}

func invalidQuery(format string, args ...any) error {
	return bidgate.InvalidInput("invalid_query", fmt.Sprintf(format, args...))
}

// parseList reads and checks every query parameter of a list route: an
// unknown or repeated one, or a malformed value, is refused with its name.
func parseList(args *fasthttp.Args, route listRoute) (listRequest, error) {
	vals := map[string]string{}
	for k, v := range args.All() {
		name := string(k)
		switch {
		case !route.params[name]:
			return listRequest{}, invalidQuery("unknown parameter %s (this route takes %s)", quoteShort(name), paramList(route.params))
		case len(args.PeekMulti(name)) > 1:
			return listRequest{}, invalidQuery("%s is given more than once", name)
		case len(v) == 0:
			return listRequest{}, invalidQuery("%s is empty", name)
		}
		vals[name] = string(v)
	}
	r := listRequest{query: bidgate.ListQuery{Sort: route.sort, Limit: defaultListLimit}, cursor: vals["cursor"]}
	f := &r.query.Filter
	f.Status = route.status
	if v, ok := vals["status"]; ok {
		switch s := bidgate.Status(v); s {
		case bidgate.StatusOpen, bidgate.StatusClosed, bidgate.StatusCancelled:
			f.Status = s
		default:
			return r, invalidQuery("status must be OPEN, CLOSED or CANCELLED, got %s", quoteShort(v))
		}
	}
	if v, ok := vals["sort"]; ok {
		if r.query.Sort = bidgate.ListSort(v); !r.query.Sort.Valid() {
			return r, invalidQuery("sort must be ending, newest or price_desc, got %s", quoteShort(v))
		}
	}
	if v, ok := vals["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > bidgate.MaxListLimit || strconv.Itoa(n) != v {
			return r, invalidQuery("limit must be an integer from 1 to %d, got %s", bidgate.MaxListLimit, quoteShort(v))
		}
		r.query.Limit = n
	}
	if v, ok := vals["sellerId"]; ok {
		id, err := bidgate.ParseID(v)
		if err != nil {
			return r, invalidQuery("sellerId: %v", err)
		}
		r.sellerID = &id
	}
	if v, ok := vals["q"]; ok {
		if err := checkSearch(v); err != nil {
			return r, err
		}
		f.Query = v
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"endingAfter", &f.EndingAfter}, {"endingBefore", &f.EndingBefore}} {
		v, ok := vals[t.name]
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || at.Year() < 1 {
			return r, invalidQuery("%s must be an RFC 3339 time such as 2030-01-02T15:04:05Z, got %s", t.name, quoteShort(v))
		}
		*t.to = at.Truncate(time.Microsecond)
	}
	if !f.EndingAfter.IsZero() && !f.EndingBefore.IsZero() && !f.EndingAfter.Before(f.EndingBefore) {
		return r, invalidQuery("endingBefore must be after endingAfter")
	}
	if v, ok := vals["hot"]; ok {
		if v != "true" && v != "false" {
			return r, invalidQuery("hot must be true or false, got %s", quoteShort(v))
		}
		hot := v == "true"
		f.Hot = &hot
	}
	return r, nil
}

// checkSearch refuses a q the text search cannot take: too long, not
// UTF-8, or with control characters (PostgreSQL refuses NUL outright).
func checkSearch(q string) error {
	switch {
	case !utf8.ValidString(q):
		return invalidQuery("q must be UTF-8")
	case utf8.RuneCountInString(q) > maxQueryLength:
		return invalidQuery("q must be at most %d characters", maxQueryLength)
	case strings.IndexFunc(q, unicode.IsControl) >= 0:
		return invalidQuery("q must not contain control characters")
	case strings.TrimSpace(q) == "":
		return invalidQuery("q must contain a word")
	}
	return nil
}

func paramList(params map[string]bool) string {
	names := make([]string, 0, len(params))
	for _, n := range []string{"status", "sellerId", "q", "endingAfter", "endingBefore", "hot", "sort", "limit", "cursor"} {
		if params[n] {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// quoteShort quotes a client's value for a problem's detail, cut short.
func quoteShort(s string) string {
	if len(s) > 24 {
		s = s[:24] + "..."
	}
	return strconv.Quote(s)
}

// scope names a list (route, sort and every filter) for its cursors: a
// cursor is refused by any other list.
func (r listRequest) scope(route listRoute) string {
	f := r.query.Filter
	hot := ""
	if f.Hot != nil {
		hot = strconv.FormatBool(*f.Hot)
	}
	return strings.Join([]string{route.name, string(r.query.Sort), string(f.Status), strconv.FormatInt(f.SellerID, 10),
		strconv.Quote(f.Query), micros(f.EndingAfter), micros(f.EndingBefore), hot}, "|")
}

func micros(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

// A position is the sort's value (microseconds since 1970, or cents) and
// the id, 8 bytes each.
const positionLen = 16

func encodePosition(sort bidgate.ListSort, k bidgate.ListKey) []byte {
	b := make([]byte, positionLen)
	v := k.Time.UnixMicro()
	if sort == bidgate.SortPriceDesc {
		v = k.Price.Shift(2).IntPart()
	}
	binary.BigEndian.PutUint64(b, uint64(v))
	binary.BigEndian.PutUint64(b[8:], uint64(k.ID))
	return b
}

func decodePosition(sort bidgate.ListSort, b []byte) (bidgate.ListKey, bool) {
	if len(b) != positionLen {
		return bidgate.ListKey{}, false
	}
	v, id := int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))
	if id <= 0 {
		return bidgate.ListKey{}, false
	}
	k := bidgate.ListKey{ID: id}
	if sort == bidgate.SortPriceDesc {
		k.Price = decimal.New(v, -2)
	} else {
		k.Time = time.UnixMicro(v).UTC()
	}
	return k, true
}

var errInvalidCursor = bidgate.InvalidInput("invalid_cursor",
	"cursor was not issued by this service for this list (the same sort and filters, or the same auction or user), or was altered; start again without it")

// listPage is the answer of a list route.
type listPage struct {
	Items      []auctionResponse `json:"items"`
	NextCursor *string           `json:"nextCursor"`
}

// listAuctions serves GET /auctions: public, every seller's auctions.
func (s *Server) listAuctions(ctx *fasthttp.RequestCtx) {
	r, err := parseList(ctx.QueryArgs(), publicList)
	if err == nil && r.sellerID != nil {
		r.query.Filter.SellerID = *r.sellerID
	}
	s.answerList(ctx, publicList, r, err)
}

// myAuctions serves GET /me/auctions: the caller's own auctions, every
// status unless one is asked for.
func (s *Server) myAuctions(ctx *fasthttp.RequestCtx, seller auth.Principal) {
	r, err := parseList(ctx.QueryArgs(), myList)
	if err == nil {
		r.query.Filter.SellerID, err = actingUser(seller.UserID, r.sellerID, "sellerId", "invalid_query")
	}
	s.answerList(ctx, myList, r, err)
}

func (s *Server) answerList(ctx *fasthttp.RequestCtx, route listRoute, r listRequest, err error) {
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	scope := r.scope(route)
	if r.cursor != "" {
		pos, err := s.cursors.Open(scope, r.cursor)
		var ok bool
		if err == nil {
			r.query.After, ok = decodePosition(r.query.Sort, pos)
		}
		if !ok {
			s.writeError(ctx, errInvalidCursor)
			return
		}
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	p, err := s.lister.ListAuctions(c, r.query)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	page := listPage{Items: make([]auctionResponse, 0, len(p.Items))}
	if p.Next != nil {
		next := s.cursors.Seal(scope, encodePosition(r.query.Sort, *p.Next))
		page.NextCursor = &next
	}
	// The public list names no leader by id (leader privacy); a seller's
	// own list is the seller's view.
	view := publicAuctionResponse
	if route.name == myList.name {
		view = newAuctionResponse
	}
	for _, a := range p.Items {
		page.Items = append(page.Items, view(a))
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}
