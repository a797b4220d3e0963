package bench

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"bidgate"
)

// The kinds of a bid row (table bid, column kind).
const (
	rowStraight = string(bidgate.KindStraight)
	rowProxy    = string(bidgate.KindProxy)
	rowAuto     = string(bidgate.KindAutomatic)
	rowBuyNow   = string(bidgate.KindBuyNow)
)

// decision is what the rules made of one accepted request: whether its
// bidder led right after, and the public price then. Every answer to the
// request (its 201 and each 200 replay) must say the same.
type decision struct {
	leading bool
	price   decimal.Decimal
}

// replay is an auction's history as the auction rules (docs/api.md "Auction
// rules") decide it, rebuilt from the bidders' own rows alone: each
// straight or proxy row's value (its amount, or its maximum) and bidder,
// in seq order. Nothing the stores derived (a row's amount, an automatic
// row, the auction row) feeds the state, so a wrong derived value shows
// up where it is, and the final state is the rules' whatever the stores
// wrote. It is the audit's model of what every store had to do.
type replay struct {
	auction         int64
	inc             decimal.Decimal
	reserve, buyNow decimal.NullDecimal

	price  decimal.Decimal // P: public
	leader int64           // L: 0 while nobody leads
	lmax   decimal.Decimal // L's hidden maximum (a straight bid's is its amount)
	bought bool            // closed by a buy-now at seq 1

	decided map[uuid.UUID]decision // by the request's Idempotency-Key; nil until the first
	// Rows that are not what the rules say: how many, and the first few
	// (a systematic fault would otherwise keep a line per row).
	nfaults int
	faults  []string
}

// optMoney reads an optional amount ("" is none).
func optMoney(s string) decimal.NullDecimal {
	if s == "" {
		return decimal.NullDecimal{}
	}
	return decimal.NewNullDecimal(money(s))
}

// replayAuction replays s's rows (in seq order).
func replayAuction(s AuctionSpec, rows []BidRow) *replay {
	r := &replay{auction: s.ID, inc: money(s.MinIncrement), reserve: optMoney(s.ReservePrice), buyNow: optMoney(s.BuyNowPrice),
		price: money(s.StartPrice)}
	for i := 0; i < len(rows); i++ {
		b := rows[i]
		switch {
		case r.bought:
			r.fault(b, "%s row by %d after the buy-now at seq 1 (the auction closed at once: auction_closed)", b.Kind, b.BidderID)
		case b.Kind == rowBuyNow:
			r.buy(b, i)
		case b.Kind == rowStraight || b.Kind == rowProxy:
			if r.bid(b, rows[i+1:]) {
				i++ // the automatic row that answered it
			}
		case b.Kind == rowAuto:
			r.fault(b, "automatic row by %d at %s answers no bid (it must follow a bid the leader's maximum covers)", b.BidderID, b.Amount)
		default:
			r.fault(b, "unknown kind %q", b.Kind)
		}
	}
	return r
}

func (r *replay) fault(b BidRow, format string, args ...any) {
	r.nfaults++
	if len(r.faults) < maxExamples {
		r.faults = append(r.faults, fmt.Sprintf("auction %d seq %d: ", r.auction, b.Seq)+fmt.Sprintf(format, args...))
	}
}

// decide records what the rules made of the request with Idempotency-Key
// key.
func (r *replay) decide(key uuid.UUID, leading bool) {
	if r.decided == nil {
		r.decided = map[uuid.UUID]decision{}
	}
	r.decided[key] = decision{leading: leading, price: r.price}
}

// reserveMet says whether the auction has a reserve, and whether its
// leader's bid reaches it (below it nobody wins).
func (r *replay) reserveMet() (met, has bool) {
	if !r.reserve.Valid {
		return false, false
	}
	return r.leader != 0 && r.price.GreaterThanOrEqual(r.reserve.Decimal), true
}

// winner is who wins if the auction ends now: the leader, unless the
// price is below the reserve (0: nobody).
func (r *replay) winner() int64 {
	if met, has := r.reserveMet(); has && !met {
		return 0
	}
	return r.leader
}

// jumpToReserve applies the reserve after a decision: once the leader's
// maximum reaches it, the price is at least the reserve.
func (r *replay) jumpToReserve() {
	if res := r.reserve; res.Valid && r.lmax.GreaterThanOrEqual(res.Decimal) && r.price.LessThan(res.Decimal) {
		r.price = res.Decimal
	}
}

// value is what a straight or proxy row's bidder asked for: the amount, or
// the maximum; false when the row cannot be a bid.
func (r *replay) value(b BidRow) (decimal.Decimal, bool) {
	amount := money(b.Amount)
	if b.Kind == rowStraight {
		if b.MaxAmount != "" {
			r.fault(b, "straight row by %d carries a maximum %s", b.BidderID, b.MaxAmount)
		}
		return amount, true
	}
	if b.MaxAmount == "" {
		r.fault(b, "proxy row by %d has no maximum", b.BidderID)
		return decimal.Decimal{}, false
	}
	m := money(b.MaxAmount)
	if m.LessThan(amount) {
		r.fault(b, "proxy row by %d stands at %s, above its maximum %s", b.BidderID, b.Amount, b.MaxAmount)
	}
	return m, true
}

// buy replays a buy-now row, the i-th of the history.
func (r *replay) buy(b BidRow, i int) {
	switch {
	case i > 0:
		r.fault(b, "buy-now by %d after %d bid rows (refused once a bid is accepted: buy_now_unavailable)", b.BidderID, i)
		return
	case !r.buyNow.Valid:
		r.fault(b, "buy-now by %d on an auction without a buy-now price", b.BidderID)
		return
	case !money(b.Amount).Equal(r.buyNow.Decimal):
		r.fault(b, "buy-now by %d at %s, the buy-now price is %s", b.BidderID, b.Amount, r.buyNow.Decimal.StringFixed(2))
	}
	r.leader, r.price, r.lmax, r.bought = b.BidderID, r.buyNow.Decimal, r.buyNow.Decimal, true
	r.decide(b.RequestID, true)
}

// bid replays a straight or proxy row; rest are the rows after it. It
// reports whether rest[0] was the automatic row answering it (and checked
// as such).
func (r *replay) bid(b BidRow, rest []BidRow) bool {
	v, ok := r.value(b)
	if !ok {
		return false
	}
	if least := r.price.Add(r.inc); v.LessThan(least) {
		r.fault(b, "%s bid of %s by %d accepted below the minimum %s (bid_too_low)", b.Kind, v.StringFixed(2), b.BidderID, least.StringFixed(2))
		return false
	}
	proxy := b.Kind == rowProxy
	want, leading := decimal.Decimal{}, true // the row's amount
	switch {
	case b.BidderID == r.leader && !proxy:
		r.fault(b, "the leader %d's straight bid of %s was accepted (already_leading)", b.BidderID, b.Amount)
		return false
	case b.BidderID == r.leader && !v.GreaterThan(r.lmax):
		r.fault(b, "the leader %d's proxy with maximum %s, not above their %s, was accepted (max_not_raised)",
			b.BidderID, v.StringFixed(2), r.lmax.StringFixed(2))
		return false
	case b.BidderID == r.leader: // rule 1: the leader raises their maximum
		r.lmax = v
		r.jumpToReserve()
		want = r.price
	case r.leader == 0 || v.GreaterThan(r.lmax): // rule 2: the bidder leads
		switch {
		case !proxy:
			r.price = v
		case r.leader == 0:
			r.price = r.price.Add(r.inc)
		default:
			r.price = decimal.Min(v, r.lmax.Add(r.inc))
		}
		r.leader, r.lmax = b.BidderID, v
		r.jumpToReserve()
		want = r.price
	default: // rule 3: the leader's proxy answers; the earlier maximum wins a tie
		r.price = decimal.Min(r.lmax, v.Add(r.inc))
		r.jumpToReserve()
		want, leading = v, false
	}
	if !money(b.Amount).Equal(want) {
		r.fault(b, "%s bid by %d (value %s) recorded at %s; the rules put it at %s", b.Kind, b.BidderID, v.StringFixed(2), b.Amount, want.StringFixed(2))
	}
	r.decide(b.RequestID, leading)
	if leading {
		return false
	}
	return r.automatic(b, rest)
}

// automatic checks the row that must follow a bid the leader's maximum
// covers: the leader's automatic bid at the new price, its request id
// derived from the bid's.
func (r *replay) automatic(bid BidRow, rest []BidRow) bool {
	if len(rest) == 0 || rest[0].Kind != rowAuto {
		next := "none"
		if len(rest) > 0 {
			next = fmt.Sprintf("%s by %d at %s", rest[0].Kind, rest[0].BidderID, rest[0].Amount)
		}
		r.fault(bid, "the leader %d's maximum covers %d's bid: an automatic row by %d at %s must follow; the next row is %s",
			r.leader, bid.BidderID, r.leader, r.price.StringFixed(2), next)
		return false
	}
	a := rest[0]
	switch {
	case a.BidderID != r.leader || !money(a.Amount).Equal(r.price) || a.MaxAmount != "":
		r.fault(a, "automatic row by %d at %s (maximum %q); the rules put the leader %d at %s",
			a.BidderID, a.Amount, a.MaxAmount, r.leader, r.price.StringFixed(2))
	case a.RequestID != bidgate.AutomaticRequestID(bid.RequestID):
		r.fault(a, "automatic row's request id %s is not the one derived from the bid's %s (%s)",
			a.RequestID, bid.RequestID, bidgate.AutomaticRequestID(bid.RequestID))
	}
	return true
}
