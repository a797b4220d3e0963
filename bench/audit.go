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
	"bidgate/persist/kafka"
)

// Dataset is everything the audit looks at: what the harness created and
// saw, and what the stores hold afterwards. Audit is a pure function of it.
type Dataset struct {
	Auctions []AuctionSpec // the auctions under audit, as created
	Records  []Record      // every request and its answer
	Rows     []AuctionRow  // their auction rows in PostgreSQL
	Bids     []BidRow      // their bid rows
	Outbox   []OutboxRow   // outbox rows naming them
	Redis    map[int64]RedisState
	// ClosedBy is a database time by which every auction whose effective
	// end had passed must be CLOSED (the moment the pipeline was seen
	// drained). Zero skips that check.
	ClosedBy time.Time
}

// AuctionRow is a row of table auction.
type AuctionRow struct {
	ID           int64
	Status       string
	Mode         string
	StartPrice   string
	CurrentPrice string
	MinIncrement string
	LeaderID     int64 // 0: none
	BidCount     int64
	EndTime      time.Time
	ClosedAt     time.Time // zero while open
}

// BidRow is a row of table bid.
type BidRow struct {
	AuctionID  int64
	BidderID   int64
	Amount     string
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
const TopicAuctionClosed = kafka.TopicAuctionClosed

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
	CheckIdempotency    = "idempotency"
	CheckAuthorized     = "authorized"
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
	specs  []AuctionSpec
	rows   map[int64]*AuctionRow
	bids   map[int64][]BidRow // by auction, in seq order
	byKey  map[reqKey][]BidRow
	outbox map[int64][]OutboxRow
	redis  map[int64]RedisState
}

func newIndex(d Dataset) *index {
	ix := &index{specs: d.Auctions, rows: map[int64]*AuctionRow{}, bids: map[int64][]BidRow{},
		byKey: map[reqKey][]BidRow{}, outbox: map[int64][]OutboxRow{}, redis: d.Redis}
	for i := range d.Rows {
		ix.rows[d.Rows[i].ID] = &d.Rows[i]
	}
	for _, b := range d.Bids {
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
	return ix
}

// top is the highest accepted bid of an auction (the last in seq order).
func (ix *index) top(id int64) (BidRow, bool) {
	b := ix.bids[id]
	if len(b) == 0 {
		return BidRow{}, false
	}
	return b[len(b)-1], true
}

// effectiveEnd is the latest end anything knows of: the row's, the last
// bid's, Redis's.
func (ix *index) effectiveEnd(s AuctionSpec) time.Time {
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
	return []Check{
		checkPersisted(ix, d.Records),
		checkBeforeEnd(ix),
		checkLateRefused(d.Records),
		checkClosedAfterEnd(ix),
		checkLeader(ix),
		checkWinner(ix),
		checkEndedClosed(ix, d.ClosedBy),
		checkRedis(ix),
		checkRising(ix),
		checkIdempotency(ix, d.Records),
		checkAuthorized(d.Records),
	}
}

func money(s string) decimal.Decimal {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.NewFromInt(-1)
	}
	return d
}

func sameMoney(a, b string) bool { return money(a).Equal(money(b)) }

func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

// Invariant 1: every 201 is in the bid table with the same request id,
// bidder, amount, seq and acceptance time.
func checkPersisted(ix *index, recs []Record) Check {
	c := Check{ID: CheckPersisted, Invariant: 1, Name: "every 201 is in the bid table (same request id, bidder, amount, seq)"}
	for _, r := range recs {
		if r.Outcome != Created {
			continue
		}
		c.Checked++
		rows := ix.byKey[reqKey{r.AuctionID, r.Key}]
		if len(rows) == 0 {
			c.fail("lost: auction %d key %s (seq %d, bidder %d, %s) is not in the bid table", r.AuctionID, r.Key, r.Seq, r.BidderID, r.Amount)
			continue
		}
		b := rows[0]
		if b.BidderID != r.BidderID || !sameMoney(b.Amount, r.Amount) || b.Seq != r.Seq ||
			(!r.AcceptedAt.IsZero() && !sameTime(b.AcceptedAt, r.AcceptedAt)) {
			c.fail("auction %d key %s: answered seq %d bidder %d %s at %s, table has seq %d bidder %d %s at %s",
				r.AuctionID, r.Key, r.Seq, r.BidderID, r.Amount, r.AcceptedAt.Format(time.RFC3339Nano),
				b.Seq, b.BidderID, b.Amount, b.AcceptedAt.Format(time.RFC3339Nano))
		}
	}
	return c.done()
}

// Invariant 2: each bid was accepted strictly before the end in force when
// it was decided (the previous bid's end, or the original end), and no bid
// shortened the auction.
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
			case b.EndTime.Before(end):
				c.fail("auction %d seq %d moved the end back from %s to %s", s.ID, b.Seq,
					end.Format(time.RFC3339Nano), b.EndTime.Format(time.RFC3339Nano))
			}
			if b.EndTime.After(end) {
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

// Invariant 3: the row's price, leader and bid count are the highest
// accepted bid's (or the start price and nobody).
func checkLeader(ix *index) Check {
	c := Check{ID: CheckLeader, Invariant: 3, Name: "leader and price equal the highest accepted bid"}
	for _, s := range ix.specs {
		r := ix.rows[s.ID]
		c.Checked++
		if r == nil {
			c.fail("auction %d has no row", s.ID)
			continue
		}
		n := int64(len(ix.bids[s.ID]))
		top, ok := ix.top(s.ID)
		switch {
		case !ok && (!sameMoney(r.CurrentPrice, r.StartPrice) || r.LeaderID != 0 || r.BidCount != 0):
			c.fail("auction %d has no bids but price %s (start %s), leader %d, %d bids", s.ID, r.CurrentPrice, r.StartPrice, r.LeaderID, r.BidCount)
		case ok && (!sameMoney(r.CurrentPrice, top.Amount) || r.LeaderID != top.BidderID || r.BidCount != n):
			c.fail("auction %d: row has price %s leader %d, %d bids; highest bid is %s by %d, %d bids",
				s.ID, r.CurrentPrice, r.LeaderID, r.BidCount, top.Amount, top.BidderID, n)
		}
	}
	return c.done()
}

// Invariant 3: a closed auction has exactly one auction-closed event, and
// it names the highest bidder and price; an open one has none.
func checkWinner(ix *index) Check {
	c := Check{ID: CheckWinner, Invariant: 3, Name: "closed exactly once: one auction-closed event naming the highest bidder"}
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
		top, ok := ix.top(s.ID)
		wantPrice := s.StartPrice
		if ok {
			wantPrice = top.Amount
		}
		switch {
		case !ok && ev.WinnerID != nil:
			c.fail("auction %d had no bids but its event names winner %d", s.ID, *ev.WinnerID)
		case ok && (ev.WinnerID == nil || *ev.WinnerID != top.BidderID):
			c.fail("auction %d: event names winner %s, highest bid is by %d", s.ID, ptrString(ev.WinnerID), top.BidderID)
		case !sameMoney(ev.FinalPrice, wantPrice):
			c.fail("auction %d: event says final price %s, highest bid is %s", s.ID, ev.FinalPrice, wantPrice)
		case ev.BidCount != int64(len(ix.bids[s.ID])):
			c.fail("auction %d: event says %d bids, the table has %d", s.ID, ev.BidCount, len(ix.bids[s.ID]))
		case r.LeaderID != top.BidderID:
			c.fail("auction %d: row's winner %d, highest bid by %d", s.ID, r.LeaderID, top.BidderID)
		}
	}
	return c.done()
}

func ptrString(p *int64) string {
	if p == nil {
		return "none"
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
// the persisted history.
func checkRedis(ix *index) Check {
	c := Check{ID: CheckRedis, Invariant: 3, Name: "Redis state of hot auctions agrees with the bid table"}
	for _, s := range ix.specs {
		st, ok := ix.redis[s.ID]
		if !ok {
			continue
		}
		c.Checked++
		n := int64(len(ix.bids[s.ID]))
		top, has := ix.top(s.ID)
		price := s.StartPrice
		if has {
			price = top.Amount
		}
		switch {
		case st.Seq != n:
			c.fail("auction %d: Redis has %d bids, the table %d", s.ID, st.Seq, n)
		case !sameMoney(st.Price, price) || st.Leader != top.BidderID:
			c.fail("auction %d: Redis has price %s leader %d, the table's highest bid is %s by %d", s.ID, st.Price, st.Leader, price, top.BidderID)
		case has && st.End.Before(top.EndTime):
			c.fail("auction %d: Redis end %s is before the last bid's end %s", s.ID, st.End.Format(time.RFC3339Nano), top.EndTime.Format(time.RFC3339Nano))
		}
	}
	return c.done()
}

// Invariant 4: seq runs 1..n, and each accepted amount is at least the
// previous one (the start price for the first) plus the increment.
func checkRising(ix *index) Check {
	c := Check{ID: CheckRising, Invariant: 4, Name: "accepted amounts rise by at least the increment in seq order (seq 1..n)"}
	for _, s := range ix.specs {
		inc := money(s.MinIncrement)
		prev := money(s.StartPrice)
		for i, b := range ix.bids[s.ID] {
			c.Checked++
			amount := money(b.Amount)
			switch {
			case b.Seq != int64(i+1):
				c.fail("auction %d: bid %d in seq order has seq %d", s.ID, i+1, b.Seq)
			case amount.LessThan(prev.Add(inc)):
				c.fail("auction %d seq %d: %s after %s with increment %s", s.ID, b.Seq, b.Amount, prev.StringFixed(2), s.MinIncrement)
			}
			prev = amount
		}
	}
	return c.done()
}

// Invariant 5: one row per (auction, Idempotency-Key); at most one 201 per
// key; every 200 and 201 of a key carries the seq of the one row.
func checkIdempotency(ix *index, recs []Record) Check {
	c := Check{ID: CheckIdempotency, Invariant: 5, Name: "one bid per Idempotency-Key; every replay (200) returned the original seq"}
	for k, rows := range ix.byKey {
		c.Checked++
		if len(rows) > 1 {
			seqs := make([]int64, len(rows))
			for i, b := range rows {
				seqs[i] = b.Seq
			}
			c.fail("auction %d key %s has %d bid rows (seq %v)", k.auction, k.key, len(rows), seqs)
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
