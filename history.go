package bidgate

import (
	"slices"
	"time"

	"github.com/shopspring/decimal"
)

// MaxPageSize bounds one page of a history or a user's bids; DefaultPageSize
// is a page's size when the client names none.
const (
	MaxPageSize     = 100
	DefaultPageSize = 20
)

// HistoryEntry is one accepted row of an auction's bid history, with the
// alias of its bidder: the bidder's rank by first accepted row in that
// auction, which never changes since rows are only ever appended.
type HistoryEntry struct {
	Seq        int64
	BidderID   int64 // shown to the seller, operators and the bidder only
	Alias      int64 // "Bidder <Alias>"
	Amount     decimal.Decimal
	Kind       BidKind
	MaxAmount  decimal.NullDecimal // shown to its own bidder only
	AcceptedAt time.Time
}

// HistoryPage is a page of an auction's history, newest first. More says
// whether older rows follow the page's last.
type HistoryPage struct {
	SellerID int64
	Entries  []HistoryEntry
	More     bool
}

// MyBidState is where a user stands in an auction they bid on.
type MyBidState string

const (
	MyBidLeading   MyBidState = "leading"
	MyBidOutbid    MyBidState = "outbid"
	MyBidWon       MyBidState = "won"
	MyBidLost      MyBidState = "lost"
	MyBidCancelled MyBidState = "cancelled"
)

// MyBidStates lists every MyBidState, in the order the API documents them.
var MyBidStates = []MyBidState{MyBidLeading, MyBidOutbid, MyBidWon, MyBidLost, MyBidCancelled}

// StateOf is where user stands in a: a leader wins only at or above the
// reserve, as the closer decides.
func StateOf(a Auction, user int64) MyBidState {
	switch a.Status {
	case StatusCancelled:
		return MyBidCancelled
	case StatusClosed:
		if met, has := a.ReserveMet(); a.LeaderID == user && (met || !has) {
			return MyBidWon
		}
		return MyBidLost
	}
	if a.LeaderID == user {
		return MyBidLeading
	}
	return MyBidOutbid
}

// MyBid is one auction a user bid on: the auction, the user's highest row
// and highest proxy maximum there, and where the user stands.
type MyBid struct {
	Auction   Auction
	Highest   decimal.Decimal
	MaxAmount decimal.NullDecimal // the user's own, never another's
	State     MyBidState
}

// MyBidsQuery asks for a page of a user's auctions, newest auction first:
// those with id below Before (0: from the newest), in State ("" for all).
type MyBidsQuery struct {
	UserID int64
	State  MyBidState
	Before int64
	Limit  int
}

// MyBidsPage is a page of MyBid. Next is the id to continue before when
// more may follow (0: the last page). A page can hold fewer than the limit
// and still have a Next: a hot auction's live leader may move it out of the
// state asked for.
type MyBidsPage struct {
	Items []MyBid
	Next  int64
}

// AliasesOf numbers the bidders of an auction's rows by their first row:
// the first bidder is 1, the next new one 2, and so on.
func AliasesOf(bids []Bid) map[int64]int64 {
	bids = slices.Clone(bids)
	slices.SortFunc(bids, func(a, b Bid) int { return int(a.Seq - b.Seq) })
	aliases := make(map[int64]int64)
	for _, b := range bids {
		if _, ok := aliases[b.BidderID]; !ok {
			aliases[b.BidderID] = int64(len(aliases) + 1)
		}
	}
	return aliases
}
