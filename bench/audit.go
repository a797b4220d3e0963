package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"bidgate"
)

// Dataset is everything the audit looks at: what the harness created and
// saw, and what the stores hold afterwards. Audit is a pure function of it.
type Dataset struct {
	Auctions []AuctionSpec // the auctions under audit, as created
	Records  []Record      // every request and its answer
	Rows     []AuctionRow  // their auction rows in PostgreSQL
	Bids     []BidRow      // their bid rows
	Outbox   []OutboxRow   // outbox rows naming them
	Notices  []NoticeRow   // the notices stored about them
	Redis    map[int64]RedisState
	// ClosedBy is a database time by which every auction whose effective
	// end had passed must be CLOSED (the moment the pipeline was seen
	// drained). Zero skips that check.
	ClosedBy time.Time
	// Watched is set when the run had WebSocket viewers; Viewers is what
	// each one saw.
	Watched bool
	Viewers []ViewerLog
}

// AuctionRow is a row of table auction.
type AuctionRow struct {
	ID           int64
	SellerID     int64
	Status       string
	Mode         string
	StartPrice   string
	CurrentPrice string
	MinIncrement string
	LeaderID     int64 // 0: none
	BidCount     int64
	EndTime      time.Time
	ClosedAt     time.Time // zero while open
	// The hidden columns ("" for NULL): the audit reads them from the
	// table; no answer may show them.
	ReservePrice string
	BuyNowPrice  string
	LeaderMax    string // as of the last cold decision (a hot auction's is Redis's)
}

// BidRow is a row of table bid.
type BidRow struct {
	AuctionID  int64
	BidderID   int64
	Amount     string // a proxy row's: what the bid stood at once decided
	Kind       string // straight, proxy, automatic, buy_now ("" reads as straight)
	MaxAmount  string // a proxy row's hidden maximum; "" for the others
	RequestID  uuid.UUID
	Seq        int64
	AcceptedAt time.Time
	EndTime    time.Time
}

// OutboxRow is a row of table outbox.
type OutboxRow struct {
	AggregateID int64
	Topic       string
	Payload     string
}

// RedisState is a hot auction's state hash (auction:{id}:state).
type RedisState struct {
	Price  string // decimal
	Leader int64
	Lmax   string // the leader's hidden maximum, decimal; "" when the hash has none
	Seq    int64
	End    time.Time
	Status string
}

// Check is one audit result.
type Check struct {
	ID        string   `json:"id"`        // stable: persisted, before-end, ...
	Invariant int      `json:"invariant"` // DESIGN.md's numbering
	Name      string   `json:"name"`
	Pass      bool     `json:"pass"`
	Checked   int      `json:"checked"`
	Failed    int      `json:"failed"`
	Examples  []string `json:"examples,omitempty"`
}

// TopicAuctionClosed is the outbox topic of closing events.
const TopicAuctionClosed = bidgate.TopicAuctionClosed

// The ids of Audit's checks.
const (
	CheckPersisted      = "persisted"
	CheckBeforeEnd      = "before-end"
	CheckLateRefused    = "late-refused"
	CheckClosedAfterEnd = "closed-after-end"
	CheckLeader         = "leader"
	CheckWinner         = "winner"
	CheckEndedClosed    = "ended-closed"
	CheckRedis          = "redis"
	CheckRising         = "rising"
	CheckRules          = "rules"
	CheckHidden         = "hidden"
	CheckIdempotency    = "idempotency"
	CheckAuthorized     = "authorized"
	CheckViewerOrder    = "viewer-order"
	CheckViewerFinal    = "viewer-final"
)

const maxExamples = 5

func (c *Check) fail(format string, args ...any) {
	c.Failed++
	if len(c.Examples) < maxExamples {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

func (c *Check) done() Check {
	c.Pass = c.Failed == 0
	return *c
}

type reqKey struct {
	auction int64
	key     uuid.UUID
}

// index is the dataset arranged for the checks.
type index struct {
	specs   []AuctionSpec
	rows    map[int64]*AuctionRow
	bids    map[int64][]BidRow // by auction, in seq order
	byKey   map[reqKey][]BidRow
	outbox  map[int64][]OutboxRow
	redis   map[int64]RedisState
	replays map[int64]*replay // by auction: its history replayed by the rules
}

func newIndex(d Dataset) *index {
	ix := &index{specs: d.Auctions, rows: map[int64]*AuctionRow{}, bids: map[int64][]BidRow{},
		byKey: map[reqKey][]BidRow{}, outbox: map[int64][]OutboxRow{}, redis: d.Redis, replays: map[int64]*replay{}}
	for i := range d.Rows {
		ix.rows[d.Rows[i].ID] = &d.Rows[i]
	}
	for _, b := range d.Bids {
		if b.Kind == "" {
			b.Kind = rowStraight // a row from before bid kinds
		}
		ix.bids[b.AuctionID] = append(ix.bids[b.AuctionID], b)
		k := reqKey{b.AuctionID, b.RequestID}
		ix.byKey[k] = append(ix.byKey[k], b)
	}
	for id := range ix.bids {
		slices.SortStableFunc(ix.bids[id], func(a, b BidRow) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	for _, o := range d.Outbox {
		if o.Topic == TopicAuctionClosed {
			ix.outbox[o.AggregateID] = append(ix.outbox[o.AggregateID], o)
		}
	}
	for _, s := range d.Auctions {
		ix.replays[s.ID] = replayAuction(s, ix.bids[s.ID])
	}
	return ix
}

// top is the last accepted row of an auction in seq order.
func (ix *index) top(id int64) (BidRow, bool) {
	b := ix.bids[id]
	if len(b) == 0 {
		return BidRow{}, false
	}
	return b[len(b)-1], true
}

// effectiveEnd is the latest end anything knows of: the row's, the last
// bid's, Redis's. A buy-now ends the auction at its own instant, earlier
// than all of them but the bid's.
func (ix *index) effectiveEnd(s AuctionSpec) time.Time {
	if b := ix.bids[s.ID]; len(b) > 0 && b[0].Kind == rowBuyNow {
		return b[0].EndTime
	}
	end := s.OriginalEnd
	if r := ix.rows[s.ID]; r != nil && r.EndTime.After(end) {
		end = r.EndTime
	}
	if b, ok := ix.top(s.ID); ok && b.EndTime.After(end) {
		end = b.EndTime
	}
	if st, ok := ix.redis[s.ID]; ok && st.End.After(end) {
		end = st.End
	}
	return end
}

// Audit checks the design's invariants on d and returns one Check each.
func Audit(d Dataset) []Check {
	ix := newIndex(d)
	checks := []Check{
		checkPersisted(ix, d.Records),
		checkBeforeEnd(ix),
		checkLateRefused(d.Records),
		checkClosedAfterEnd(ix),
		checkLeader(ix),
		checkWinner(ix),
		checkEndedClosed(ix, d.ClosedBy),
		checkRedis(ix),
		checkRising(ix),
		checkRules(ix, d.Records),
		checkHidden(d.Records),
		checkIdempotency(ix, d.Records),
		checkAuthorized(d.Records),
		checkNotices(ix, d.Notices),
	}
	if d.Watched {
		checks = append(checks, checkViewerOrder(d.Viewers), checkViewerFinal(ix, d.Viewers))
	}
	return checks
}

func money(s string) decimal.Decimal {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.NewFromInt(-1)
	}
	return d
}

func sameMoney(a, b string) bool { return money(a).Equal(money(b)) }

// isMoney reports whether the text s is the amount d.
func isMoney(s string, d decimal.Decimal) bool { return money(s).Equal(d) }

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

// Invariant 1: every 201 is in the bid table with the same request id,
// bidder, kind, value (a straight bid's amount, a proxy bid's maximum),
// seq, acceptance time and the amount its answer gave.
func checkPersisted(ix *index, recs []Record) Check {
	c := Check{ID: CheckPersisted, Invariant: 1, Name: "every 201 is in the bid table (same request id, bidder, kind, amount or maximum, seq)"}
	for i := range recs {
		r := &recs[i]
		if r.Outcome != Created {
			continue
		}
		c.Checked++
		rows := ix.byKey[reqKey{r.AuctionID, r.Key}]
		if len(rows) == 0 {
			c.fail("lost: auction %d key %s (%s) is not in the bid table", r.AuctionID, r.Key, r.describe())
			continue
		}
		b := rows[0]
		if !r.matches(b) || (!r.AcceptedAt.IsZero() && !sameTime(b.AcceptedAt, r.AcceptedAt)) {
			c.fail("auction %d key %s: answered %s at %s, table has %s at %s", r.AuctionID, r.Key,
				r.describe(), r.AcceptedAt.Format(time.RFC3339Nano), b.describe(), b.AcceptedAt.Format(time.RFC3339Nano))
		}
	}
	return c.done()
}

// Invariant 2: each bid was accepted strictly before the end in force when
// it was decided (the previous bid's end, or the original end), and no bid
// shortened the auction, but a buy-now, which ends it at once.
func checkBeforeEnd(ix *index) Check {
	c := Check{ID: CheckBeforeEnd, Invariant: 2, Name: "no bid accepted at or after the end in force (previous bid's end or the original end)"}
	for _, s := range ix.specs {
		end := s.OriginalEnd
		for _, b := range ix.bids[s.ID] {
			c.Checked++
			switch {
			case !b.AcceptedAt.Before(end):
				c.fail("auction %d seq %d accepted at %s, at or after the end in force %s", s.ID, b.Seq,
					b.AcceptedAt.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
			case b.Kind == rowBuyNow && !sameTime(b.EndTime, b.AcceptedAt):
				c.fail("auction %d seq %d: a buy-now at %s set the end to %s, not to its own instant", s.ID, b.Seq,
					b.AcceptedAt.Format(time.RFC3339Nano), b.EndTime.Format(time.RFC3339Nano))
			case b.Kind != rowBuyNow && b.EndTime.Before(end):
				c.fail("auction %d seq %d moved the end back from %s to %s", s.ID, b.Seq,
					end.Format(time.RFC3339Nano), b.EndTime.Format(time.RFC3339Nano))
			}
			if b.EndTime.After(end) || b.Kind == rowBuyNow {
				end = b.EndTime
			}
		}
	}
	return c.done()
}

// Invariant 2, from the client side: bids sent after the known end (every
// answer in) were refused.
func checkLateRefused(recs []Record) Check {
	c := Check{ID: CheckLateRefused, Invariant: 2, Name: "bids sent after the end were refused"}
	for _, r := range recs {
		if r.Kind != KindLate {
			continue
		}
		c.Checked++
		if r.Outcome == Created {
			c.fail("auction %d key %s: a bid sent at %s after the end got 201 (seq %d, accepted %s, end %s)", r.AuctionID, r.Key,
				r.Sent.Format(time.RFC3339Nano), r.Seq, r.AcceptedAt.Format(time.RFC3339Nano), r.EndTime.Format(time.RFC3339Nano))
		}
	}
	return c.done()
}

// Invariant 2, for the closer: a cold auction (decided and closed by the
// same PostgreSQL clock) is never closed before its effective end. Hot
// auctions are decided by Redis's clock and settled with PostgreSQL's, two
// clocks the audit does not compare.
func checkClosedAfterEnd(ix *index) Check {
	c := Check{ID: CheckClosedAfterEnd, Invariant: 2, Name: "no cold auction closed before its effective end"}
	for _, s := range ix.specs {
		r := ix.rows[s.ID]
		if r == nil || r.Status != string(bidgate.StatusClosed) || s.Hot || r.Mode == string(bidgate.ModeHot) {
			continue
		}
		c.Checked++
		if end := ix.effectiveEnd(s); r.ClosedAt.Before(end) {
			c.fail("auction %d closed at %s, before its end %s", s.ID, r.ClosedAt.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
		}
	}
	return c.done()
}

// Invariant 3: the row's price, leader and bid count are the rules'
// outcome of its history (the start price and nobody without bids), and a
// cold row's hidden leader maximum is the leader's. A hot row's maximum is
// Redis's to keep (checkRedis).
func checkLeader(ix *index) Check {
	c := Check{ID: CheckLeader, Invariant: 3, Name: "the row's leader, price and bid count are the rules' outcome of the bid history"}
	for _, s := range ix.specs {
		r := ix.rows[s.ID]
		c.Checked++
		if r == nil {
			c.fail("auction %d has no row", s.ID)
			continue
		}
		rp := ix.replays[s.ID]
		n := int64(len(ix.bids[s.ID]))
		switch {
		case !isMoney(r.CurrentPrice, rp.price) || r.LeaderID != rp.leader || r.BidCount != n:
			c.fail("auction %d: row has price %s leader %d, %d bids; the rules give %s led by %d over %d bid rows",
				s.ID, r.CurrentPrice, r.LeaderID, r.BidCount, rp.price.StringFixed(2), rp.leader, n)
		case r.Mode == string(bidgate.ModeCold) && rp.leader != 0 && !isMoney(r.LeaderMax, rp.lmax):
			c.fail("auction %d: row has the leader's maximum %q, the rules give %s", s.ID, r.LeaderMax, rp.lmax.StringFixed(2))
		}
	}
	return c.done()
}

// Invariant 3: a closed auction has exactly one auction-closed event, and
// it names the rules' winner (nobody below the reserve), price and reserve
// outcome; an open one has none.
func checkWinner(ix *index) Check {
	c := Check{ID: CheckWinner, Invariant: 3, Name: "closed exactly once: one auction-closed event naming the winner (none below the reserve)"}
	for _, s := range ix.specs {
		r := ix.rows[s.ID]
		if r == nil {
			continue
		}
		events := ix.outbox[s.ID]
		c.Checked++
		if r.Status != string(bidgate.StatusClosed) {
			if len(events) > 0 {
				c.fail("auction %d is %s but has %d auction-closed events", s.ID, r.Status, len(events))
			}
			continue
		}
		if len(events) != 1 {
			c.fail("auction %d is closed with %d auction-closed events (want exactly 1)", s.ID, len(events))
			continue
		}
		var ev bidgate.AuctionClosed
		if err := json.Unmarshal([]byte(events[0].Payload), &ev); err != nil {
			c.fail("auction %d: event payload is not an auction-closed event: %v", s.ID, err)
			continue
		}
		if why := wrongEvent(ix.replays[s.ID], ev, int64(len(ix.bids[s.ID]))); why != "" {
			c.fail("auction %d: %s", s.ID, why)
		} else if r.LeaderID != ix.replays[s.ID].leader {
			c.fail("auction %d: the closed row's leader is %d, the rules' %d", s.ID, r.LeaderID, ix.replays[s.ID].leader)
		}
	}
	return c.done()
}

// wrongEvent says how an auction-closed event differs from the rules'
// outcome of n bid rows ("" when it does not).
func wrongEvent(rp *replay, ev bidgate.AuctionClosed, n int64) string {
	winner := rp.winner()
	met, has := rp.reserveMet()
	switch {
	case winner == 0 && ev.WinnerID != nil:
		if has && rp.leader != 0 {
			return fmt.Sprintf("the event names winner %d, but the price %s is below the reserve: nobody wins", *ev.WinnerID, rp.price.StringFixed(2))
		}
		return fmt.Sprintf("the auction had no bids but its event names winner %d", *ev.WinnerID)
	case winner != 0 && (ev.WinnerID == nil || *ev.WinnerID != winner):
		return fmt.Sprintf("the event names winner %s, the rules' winner is %d", ptrString(ev.WinnerID), winner)
	case !isMoney(ev.FinalPrice, rp.price):
		return fmt.Sprintf("the event says final price %s, the rules give %s", ev.FinalPrice, rp.price.StringFixed(2))
	case ev.BidCount != n:
		return fmt.Sprintf("the event says %d bids, the table has %d", ev.BidCount, n)
	case !has && ev.ReserveMet != nil:
		return fmt.Sprintf("the event says reserveMet %v for an auction without a reserve", *ev.ReserveMet)
	case has && (ev.ReserveMet == nil || *ev.ReserveMet != met):
		return fmt.Sprintf("the event says reserveMet %s, the rules give %v", ptrBool(ev.ReserveMet), met)
	}
	return ""
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

func ptrBool(p *bool) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}

// Invariant 3, settlement: every auction whose effective end passed by
// closedBy is CLOSED.
func checkEndedClosed(ix *index, closedBy time.Time) Check {
	c := Check{ID: CheckEndedClosed, Invariant: 3, Name: "every auction past its effective end is CLOSED"}
	if closedBy.IsZero() {
		return c.done()
	}
	for _, s := range ix.specs {
		r := ix.rows[s.ID]
		if r == nil {
			continue
		}
		end := ix.effectiveEnd(s)
		if end.After(closedBy) {
			continue
		}
		c.Checked++
		if r.Status != string(bidgate.StatusClosed) {
			c.fail("auction %d ended at %s and is still %s at %s", s.ID, end.Format(time.RFC3339Nano), r.Status, closedBy.Format(time.RFC3339Nano))
		}
	}
	return c.done()
}

// Invariant 3, hot path: Redis's state (the truth while hot) agrees with
// the rules' outcome of the persisted history.
func checkRedis(ix *index) Check {
	c := Check{ID: CheckRedis, Invariant: 3, Name: "Redis state of hot auctions agrees with the rules' outcome of the bid table"}
	for _, s := range ix.specs {
		st, ok := ix.redis[s.ID]
		if !ok {
			continue
		}
		c.Checked++
		rp := ix.replays[s.ID]
		n := int64(len(ix.bids[s.ID]))
		top, has := ix.top(s.ID)
		switch {
		case st.Seq != n:
			c.fail("auction %d: Redis has %d bids, the table %d", s.ID, st.Seq, n)
		case !isMoney(st.Price, rp.price) || st.Leader != rp.leader:
			c.fail("auction %d: Redis has price %s leader %d, the rules give %s led by %d", s.ID, st.Price, st.Leader, rp.price.StringFixed(2), rp.leader)
		case rp.leader != 0 && st.Lmax != "" && !isMoney(st.Lmax, rp.lmax):
			c.fail("auction %d: Redis has the leader's maximum %s, the rules give %s", s.ID, st.Lmax, rp.lmax.StringFixed(2))
		case has && st.End.Before(top.EndTime):
			c.fail("auction %d: Redis end %s is before the last bid's end %s", s.ID, st.End.Format(time.RFC3339Nano), top.EndTime.Format(time.RFC3339Nano))
		case rp.bought && st.Status != string(bidgate.StatusClosed):
			c.fail("auction %d was bought (buy-now) but Redis has it %s", s.ID, st.Status)
		}
	}
	return c.done()
}

// Invariant 4: seq runs 1..n, and after each decision the price is at
// least the previous price plus the increment, except that a leader's
// raise of their own maximum leaves it (or lifts it to the reserve).
// Within one decision, the automatic row answering a bid is at or above
// the bid (equal on a tie) and less than an increment above it unless the
// reserve put it there. This reads the rows alone, without the rules'
// state (checkRules has that).
func checkRising(ix *index) Check {
	c := Check{ID: CheckRising, Invariant: 4, Name: "seq runs 1..n; each decision lifts the price by at least the increment " +
		"(a leader's raise leaves it or lifts it to the reserve; an automatic bid is at most an increment above the bid it answers)"}
	for _, s := range ix.specs {
		inc, reserve := money(s.MinIncrement), optMoney(s.ReservePrice)
		atReserve := func(p decimal.Decimal) bool { return reserve.Valid && p.Equal(reserve.Decimal) }
		price := money(s.StartPrice)
		var leader int64
		rows := ix.bids[s.ID]
		for i := 0; i < len(rows); i++ {
			b := rows[i]
			c.Checked++
			if b.Seq != int64(i+1) {
				c.fail("auction %d: row %d in seq order has seq %d", s.ID, i+1, b.Seq)
				continue
			}
			amount := money(b.Amount)
			raise := b.Kind == rowProxy && b.BidderID == leader
			switch {
			case raise && !amount.Equal(price) && !(atReserve(amount) && price.LessThan(amount)):
				c.fail("auction %d seq %d: the leader %d's raise moved the price from %s to %s", s.ID, b.Seq, b.BidderID, price.StringFixed(2), b.Amount)
			case !raise && amount.LessThan(price.Add(inc)):
				c.fail("auction %d seq %d: %s after %s with increment %s", s.ID, b.Seq, b.Amount, price.StringFixed(2), s.MinIncrement)
			}
			price, leader = amount, b.BidderID
			if i+1 == len(rows) || rows[i+1].Kind != rowAuto || b.Kind == rowAuto {
				continue
			}
			// The leader's automatic answer to this bid: the decision's price.
			i++
			a := rows[i]
			c.Checked++
			auto := money(a.Amount)
			switch {
			case a.Seq != int64(i+1):
				c.fail("auction %d: row %d in seq order has seq %d", s.ID, i+1, a.Seq)
			case auto.LessThan(amount):
				c.fail("auction %d seq %d: automatic bid %s below the bid %s it answers", s.ID, a.Seq, a.Amount, b.Amount)
			case auto.GreaterThan(amount.Add(inc)) && !atReserve(auto):
				c.fail("auction %d seq %d: automatic bid %s more than the increment %s above the bid %s it answers", s.ID, a.Seq, a.Amount, s.MinIncrement, b.Amount)
			}
			price, leader = auto, a.BidderID
		}
	}
	return c.done()
}

// Invariants 3 and 4, replayed: every auction's rows are what the auction
// rules make of its bidders' own rows in seq order (each row's bidder,
// amount and kind; an automatic row of the leader's, with the derived
// request id, after each bid the leader's maximum covers; a buy-now only
// as seq 1 with nothing after it), and every answer to an accepted
// request (201, and each 200 replay) gave the rules' leading and price.
func checkRules(ix *index, recs []Record) Check {
	c := Check{ID: CheckRules, Invariant: 4, Name: "the bid history and every accepted answer follow the auction rules " +
		"(replayed: proxy maxima, automatic bids, reserve, buy-now)"}
	for _, s := range ix.specs {
		rp := ix.replays[s.ID]
		c.Checked += len(ix.bids[s.ID])
		for _, f := range rp.faults {
			c.fail("%s", f)
		}
		c.Failed += rp.nfaults - len(rp.faults)
	}
	for i := range recs {
		r := &recs[i]
		if r.Outcome != Created && r.Outcome != Replayed {
			continue
		}
		rp := ix.replays[r.AuctionID]
		if rp == nil {
			continue
		}
		d, ok := rp.decided[r.Key]
		if !ok {
			continue // not in the table: checkPersisted's and checkIdempotency's
		}
		c.Checked++
		if r.Leading != d.leading || !isMoney(r.CurrentPrice, d.price) {
			c.fail("auction %d key %s: answered %d leading %v at %q; the rules give leading %v at %s",
				r.AuctionID, r.Key, r.Status, r.Leading, r.CurrentPrice, d.leading, d.price.StringFixed(2))
		}
	}
	return c.done()
}

// docs/api.md rule 8 (not one of DESIGN.md's numbered invariants; numbered 6
// here): a hidden maximum never reaches another bidder. The only maxAmount
// an answer may carry is the one the request itself sent as a proxy bid,
// in its 201 or 200, which echo it; a refusal carries none. The echo is
// required too: it shows the harness reads the field, so that a pass is
// not merely a maximum it never saw.
func checkHidden(recs []Record) Check {
	c := Check{ID: CheckHidden, Invariant: 6, Name: "no answer shows a maximum but the proxy bidder's own (hidden maxima never leak)"}
	for i := range recs {
		r := &recs[i]
		if r.Status == 0 {
			continue // no answer
		}
		c.Checked++
		accepted := r.Outcome == Created || r.Outcome == Replayed
		switch {
		case r.ShownMax != "" && !(accepted && r.MaxAmount != "" && sameMoney(r.ShownMax, r.MaxAmount)):
			c.fail("auction %d key %s: the %d answer to bidder %d (%s) shows maxAmount %s", r.AuctionID, r.Key, r.Status,
				r.BidderID, r.describeRequest(), r.ShownMax)
		case r.ShownMax == "" && accepted && r.MaxAmount != "":
			c.fail("auction %d key %s: the %d answer to bidder %d's proxy bid does not echo its maximum %s", r.AuctionID, r.Key,
				r.Status, r.BidderID, r.MaxAmount)
		}
	}
	return c.done()
}

// Invariant 5: one row per (auction, request id): an Idempotency-Key, or
// the id an automatic row derives from the key of the bid it answers (the
// leader's proxy answers a bid once); at most one 201 per key; every 200
// and 201 of a key carries the seq of the one row.
func checkIdempotency(ix *index, recs []Record) Check {
	c := Check{ID: CheckIdempotency, Invariant: 5, Name: "one bid per Idempotency-Key (one automatic row per bid it answers); every replay (200) returned the original seq"}
	for k, rows := range ix.byKey {
		c.Checked++
		if len(rows) > 1 {
			seqs := make([]int64, len(rows))
			for i, b := range rows {
				seqs[i] = b.Seq
			}
			c.fail("auction %d request id %s has %d bid rows (seq %v, %s)", k.auction, k.key, len(rows), seqs, rows[0].Kind)
		}
	}
	type seen struct {
		created int
		seqs    []int64
	}
	keys := map[reqKey]*seen{}
	for _, r := range recs {
		if r.Outcome != Created && r.Outcome != Replayed && !(r.Status == 422 && r.Kind == KindRetry) {
			continue
		}
		k := reqKey{r.AuctionID, r.Key}
		s := keys[k]
		if s == nil {
			s = &seen{}
			keys[k] = s
		}
		switch r.Outcome {
		case Created:
			s.created++
			s.seqs = append(s.seqs, r.Seq)
		case Replayed:
			s.seqs = append(s.seqs, r.Seq)
		default:
			c.fail("auction %d key %s: a retry with the same body was refused as a reused key (422)", r.AuctionID, r.Key)
		}
	}
	for k, s := range keys {
		if len(s.seqs) == 0 {
			continue
		}
		c.Checked++
		rows := ix.byKey[k]
		switch {
		case s.created > 1:
			c.fail("auction %d key %s was accepted %d times (seq %v)", k.auction, k.key, s.created, s.seqs)
		case len(rows) == 0:
			c.fail("auction %d key %s was answered (seq %v) but has no bid row", k.auction, k.key, s.seqs)
		case rows[0].Kind == rowAuto:
			c.fail("auction %d key %s is a client's key, but its row is an automatic one (seq %d)", k.auction, k.key, rows[0].Seq)
		default:
			for _, q := range s.seqs {
				if q != rows[0].Seq {
					c.fail("auction %d key %s answered seq %v, the original bid is seq %d", k.auction, k.key, s.seqs, rows[0].Seq)
					break
				}
			}
		}
	}
	return c.done()
}

// The harness's own precondition (invariant 0: not one of the design's):
// every bid got past authentication and authorization. A run whose bids
// were refused for their token (401, 403 forbidden) or as a seller's own
// (403 self_bidding) tested nothing, and the other checks would pass on it.
func checkAuthorized(recs []Record) Check {
	c := Check{ID: CheckAuthorized, Invariant: 0, Name: "no bid refused for its bearer token or as the seller's own (401, 403)"}
	for _, r := range recs {
		if r.Status == 0 {
			continue // no answer
		}
		c.Checked++
		if r.Status == 401 || r.Status == 403 {
			c.fail("auction %d key %s, bidder %d: %d %s", r.AuctionID, r.Key, r.BidderID, r.Status, r.Code)
		}
	}
	return c.done()
}
