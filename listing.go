package bidgate

import (
	"time"

	"github.com/shopspring/decimal"
)

// ListSort is an order of an auction list. Each is a total order (id breaks
// ties) so that a page can resume after its last row (keyset pagination).
type ListSort string

const (
	SortEnding    ListSort = "ending"     // end time, soonest first
	SortNewest    ListSort = "newest"     // creation time, newest first
	SortPriceDesc ListSort = "price_desc" // current price as of the database, highest first
)

// Valid reports whether s is one of the sorts.
func (s ListSort) Valid() bool {
	return s == SortEnding || s == SortNewest || s == SortPriceDesc
}

// ListFilter selects the auctions of a list; a zero field selects all.
type ListFilter struct {
	Status       Status // "": every status
	SellerID     int64
	Query        string    // words of the title (web search syntax)
	EndingAfter  time.Time // end time at or after it
	EndingBefore time.Time // end time before it
	Hot          *bool
}

// ListKey is the position of a list's last row in its sort: the sort's
// value (Time for ending and newest, Price for price_desc) and the id.
// ID 0 is the start of the list.
type ListKey struct {
	Time  time.Time
	Price decimal.Decimal
	ID    int64
}

// ListQuery is one page of an auction list: up to Limit auctions after
// After in Sort's order.
type ListQuery struct {
	Filter ListFilter
	Sort   ListSort
	After  ListKey
	Limit  int
}

// MaxListLimit bounds a page's size.
const MaxListLimit = 100

// KeyOf is a's position in sort.
func (s ListSort) KeyOf(a Auction) ListKey {
	switch s {
	case SortNewest:
		return ListKey{Time: a.CreatedAt, ID: a.ID}
	case SortPriceDesc:
		return ListKey{Price: a.CurrentPrice, ID: a.ID}
	}
	return ListKey{Time: a.EndTime, ID: a.ID}
}

// ListPage is one page of a list: its auctions and, when more follow, the
// position of its last row as the database had it (a hot auction's live
// state may show another price or end; the next page starts from the row's).
type ListPage struct {
	Items []Auction
	Next  *ListKey
}
