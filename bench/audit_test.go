package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate"
)

var t0 = time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func key(n int) uuid.UUID { return uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)) }

func closedEvent(id int64, winner *int64, price string, bids int64, reserveMet *bool) OutboxRow {
	b, _ := json.Marshal(bidgate.AuctionClosed{AuctionID: id, WinnerID: winner, FinalPrice: price, ClosedAt: at(11 * time.Second),
		BidCount: bids, ReserveMet: reserveMet})
	return OutboxRow{AggregateID: id, Topic: TopicAuctionClosed, Payload: string(b)}
}

func ptr(n int64) *int64 { return &n }

func ptrBoolean(b bool) *bool { return &b }

// rec is the record of a request about row b answered with outcome o: a
// 201 or 200 answers b's own row (with leading true and b's amount as the
// price; answered sets others).
func rec(b BidRow, o Outcome, kind Kind) Record {
	r := Record{AuctionID: b.AuctionID, Key: b.RequestID, BidderID: b.BidderID, Kind: kind,
		Outcome: o, Intended: b.AcceptedAt, Sent: b.AcceptedAt, Latency: time.Millisecond}
	switch b.Kind {
	case rowProxy:
		r.MaxAmount = b.MaxAmount
	case rowBuyNow:
		r.BuyNow = true
	default:
		r.Amount = b.Amount
	}
	switch o {
	case Created, Replayed:
		r.Status, r.Seq, r.AcceptedAt, r.EndTime = 200, b.Seq, b.AcceptedAt, b.EndTime
		if o == Created {
			r.Status = 201
		}
		r.RowKind, r.RowAmount, r.Leading, r.CurrentPrice = cmp.Or(b.Kind, rowStraight), b.Amount, true, b.Amount
		r.ShownMax = b.MaxAmount
	case Conflict:
		r.Status, r.Code = 409, "bid_too_low"
	case PlannedTimeout:
		r.Err = "timeout"
	}
	return r
}

// answeredBy is r answered by the leader's proxy: not leading, at price.
func answeredBy(r Record, price string) Record {
	r.Leading, r.CurrentPrice = false, price
	return r
}

// refused is a request refused 409 code.
func refused(r Record, code string) Record {
	r.Outcome, r.Status, r.Code, r.Seq, r.AcceptedAt, r.EndTime = Conflict, 409, code, 0, time.Time{}, time.Time{}
	r.RowKind, r.RowAmount, r.Leading, r.CurrentPrice, r.ShownMax = "", "", false, "", ""
	return r
}

// The clean data set's auctions.
const (
	auctionCold               = 11 // cold, extended by a late bid, closed
	auctionHot                = 12 // hot, open, Redis state
	auctionNoBids             = 13 // cold, ended without bids
	auctionProxy              = 14 // cold, the worked example of docs/api.md with reserve 1800 and a raise, closed
	auctionBelow              = 15 // cold, ended below its reserve: no winner
	auctionBought             = 16 // cold, bought at once
	bidderX, bidderY, bidderZ = 101, 102, 103
)

// workedExample is the worked example of docs/api.md (start 1000, increment 10,
// reserve 1800) on auction auctionProxy, then Z raises their maximum to
// 2500: the rows and the answers.
func workedExample() ([]BidRow, []Record) {
	const a = auctionProxy
	row := func(seq int64, bidder int64, amount, kind, max string, req uuid.UUID) BidRow {
		return BidRow{AuctionID: a, BidderID: bidder, Amount: amount, Kind: kind, MaxAmount: max, RequestID: req, Seq: seq,
			AcceptedAt: at(time.Duration(seq) * time.Second / 2), EndTime: at(10 * time.Second)}
	}
	bids := []BidRow{
		row(1, bidderX, "1010.00", rowProxy, "1500.00", key(101)),
		row(2, bidderY, "1200.00", rowStraight, "", key(102)),
		row(3, bidderX, "1210.00", rowAuto, "", bidgate.AutomaticRequestID(key(102))),
		row(4, bidderY, "1500.00", rowProxy, "1500.00", key(103)), // a tie: X's earlier maximum wins
		row(5, bidderX, "1500.00", rowAuto, "", bidgate.AutomaticRequestID(key(103))),
		row(6, bidderZ, "1800.00", rowProxy, "2000.00", key(104)), // min(2000, 1510), lifted to the reserve
		row(7, bidderZ, "1800.00", rowProxy, "2500.00", key(105)), // rule 1: the leader raises; the price stays
	}
	// Answers share the decision's time (row 3 with row 2, 5 with 4).
	bids[2].AcceptedAt, bids[4].AcceptedAt = bids[1].AcceptedAt, bids[3].AcceptedAt
	records := []Record{
		rec(bids[0], Created, KindBid),
		answeredBy(rec(bids[1], Created, KindBid), "1210.00"),
		answeredBy(rec(bids[1], Replayed, KindRetry), "1210.00"),
		answeredBy(rec(bids[3], Created, KindBid), "1500.00"),
		rec(bids[5], Created, KindBid),
		rec(bids[6], Created, KindBid),
		// Z leads and bids again: refused, not an error.
		refused(rec(BidRow{AuctionID: a, BidderID: bidderZ, Amount: "1900.00", RequestID: key(106)}, Conflict, KindBid), "already_leading"),
		refused(rec(BidRow{AuctionID: a, BidderID: bidderZ, Kind: rowProxy, MaxAmount: "2400.00", RequestID: key(107)}, Conflict, KindBid), "max_not_raised"),
	}
	return bids, records
}

// cleanDataset is a consistent run: a cold auction extended by a late bid
// and closed, a hot auction still open with its Redis state, a cold
// auction that ended without bids, the worked example of proxy bids with a
// reserve, an auction that ended below its reserve and one bought at
// once. Every check has something to look at.
// notice is a stored notice row.
func notice(id string, user int64) NoticeRow {
	t, rest, _ := strings.Cut(id, "-")
	auction, _, _ := strings.Cut(rest, "-")
	n, _ := strconv.ParseInt(auction, 10, 64)
	return NoticeRow{ID: id, UserID: user, Type: t, AuctionID: n}
}

func cleanDataset() Dataset {
	const a, b, c = auctionCold, auctionHot, auctionNoBids
	const seller = 900
	bids := []BidRow{
		{AuctionID: a, BidderID: 7, Amount: "101.00", Kind: rowStraight, RequestID: key(1), Seq: 1, AcceptedAt: at(time.Second), EndTime: at(10 * time.Second)},
		// In the last second of a 1s window: extended to its time + 1s.
		{AuctionID: a, BidderID: 8, Amount: "105.00", Kind: rowStraight, RequestID: key(2), Seq: 2, AcceptedAt: at(9500 * time.Millisecond), EndTime: at(10500 * time.Millisecond)},
		{AuctionID: b, BidderID: 21, Amount: "1001.00", Kind: rowStraight, RequestID: key(3), Seq: 1, AcceptedAt: at(2 * time.Second), EndTime: at(time.Hour)},
		{AuctionID: b, BidderID: 22, Amount: "1002.00", Kind: rowStraight, RequestID: key(4), Seq: 2, AcceptedAt: at(2 * time.Second), EndTime: at(time.Hour)},
		{AuctionID: b, BidderID: 23, Amount: "1003.50", Kind: rowStraight, RequestID: key(5), Seq: 3, AcceptedAt: at(3 * time.Second), EndTime: at(time.Hour)},
		{AuctionID: auctionBelow, BidderID: 7, Amount: "120.00", Kind: rowStraight, RequestID: key(8), Seq: 1, AcceptedAt: at(time.Second), EndTime: at(5 * time.Second)},
		// A buy-now ends the auction at its own instant.
		{AuctionID: auctionBought, BidderID: 9, Amount: "500.00", Kind: rowBuyNow, RequestID: key(9), Seq: 1, AcceptedAt: at(time.Second), EndTime: at(time.Second)},
	}
	records := []Record{
		rec(bids[0], Created, KindBid),
		rec(bids[1], Created, KindBid),
		rec(bids[2], Created, KindBid),
		rec(bids[3], Created, KindBid),
		rec(bids[3], Replayed, KindRetry),     // a retry of an answered bid
		rec(bids[4], PlannedTimeout, KindBid), // timed out on purpose ...
		rec(bids[4], Replayed, KindRetry),     // ... and the retry finds it accepted
		rec(BidRow{AuctionID: b, BidderID: 24, Amount: "1002.00", RequestID: key(6)}, Conflict, KindBid),
		rec(bids[5], Created, KindBid),
		rec(bids[6], Created, KindBid),
		refused(rec(BidRow{AuctionID: auctionBought, BidderID: 10, Amount: "101.00", RequestID: key(10)}, Conflict, KindBid), "auction_closed"),
	}
	late := rec(BidRow{AuctionID: a, BidderID: 9, Amount: "999.00", RequestID: key(7), AcceptedAt: at(12 * time.Second)}, Conflict, KindLate)
	late.Code = "auction_closed"
	records = append(records, late)
	proxyBids, proxyRecords := workedExample()
	bids = append(bids, proxyBids...)
	records = append(records, proxyRecords...)
	cold := func(id int64, price string, leader int64, n int64, end, closed time.Duration) AuctionRow {
		return AuctionRow{ID: id, SellerID: seller, Status: "CLOSED", Mode: "COLD", StartPrice: "100.00", CurrentPrice: price, MinIncrement: "1.00",
			LeaderID: leader, BidCount: n, EndTime: at(end), ClosedAt: at(closed), LeaderMax: price}
	}
	rows := []AuctionRow{
		cold(a, "105.00", 8, 2, 10500*time.Millisecond, 11*time.Second),
		{ID: b, SellerID: seller, Status: "OPEN", Mode: "HOT", StartPrice: "1000.00", CurrentPrice: "1003.50", MinIncrement: "1.00",
			LeaderID: 23, BidCount: 3, EndTime: at(time.Hour)},
		cold(c, "100.00", 0, 0, 5*time.Second, 6*time.Second),
		{ID: auctionProxy, SellerID: seller, Status: "CLOSED", Mode: "COLD", StartPrice: "1000.00", CurrentPrice: "1800.00", MinIncrement: "10.00",
			LeaderID: bidderZ, BidCount: 7, EndTime: at(10 * time.Second), ClosedAt: at(11 * time.Second),
			ReservePrice: "1800.00", LeaderMax: "2500.00"},
		cold(auctionBelow, "120.00", 7, 1, 5*time.Second, 6*time.Second),
		cold(auctionBought, "500.00", 9, 1, time.Second, time.Second),
	}
	rows[2].LeaderMax = ""
	rows[4].ReservePrice = "150.00"
	rows[5].BuyNowPrice = "500.00"
	return Dataset{
		Auctions: []AuctionSpec{
			{ID: a, StartPrice: "100.00", MinIncrement: "1.00", OriginalEnd: at(10 * time.Second)},
			{ID: b, Hot: true, StartPrice: "1000.00", MinIncrement: "1.00", OriginalEnd: at(time.Hour)},
			{ID: c, StartPrice: "100.00", MinIncrement: "1.00", OriginalEnd: at(5 * time.Second)},
			{ID: auctionProxy, StartPrice: "1000.00", MinIncrement: "10.00", OriginalEnd: at(10 * time.Second), ReservePrice: "1800.00"},
			{ID: auctionBelow, StartPrice: "100.00", MinIncrement: "1.00", OriginalEnd: at(5 * time.Second), ReservePrice: "150.00"},
			{ID: auctionBought, StartPrice: "100.00", MinIncrement: "1.00", OriginalEnd: at(time.Hour), BuyNowPrice: "500.00"},
		},
		Records: records,
		Rows:    rows,
		Bids:    bids,
		Outbox: []OutboxRow{
			closedEvent(a, ptr(8), "105.00", 2, nil),
			closedEvent(c, nil, "100.00", 0, nil),
			closedEvent(auctionProxy, ptr(bidderZ), "1800.00", 7, ptrBoolean(true)),
			closedEvent(auctionBelow, nil, "120.00", 1, ptrBoolean(false)),
			closedEvent(auctionBought, ptr(9), "500.00", 1, nil),
		},
		Redis: map[int64]RedisState{b: {Price: "1003.50", Leader: 23, Lmax: "1003.50", Seq: 3, End: at(time.Hour), Status: "OPEN"}},
		// What the notifier stored: each leader a row took the lead from
		// (not those a proxy answered, not a raise), and each close.
		Notices: []NoticeRow{
			notice("outbid-11-2", 7), notice("won-11", 8), notice("lost-11-7", 7), notice("sold-11", seller),
			notice("outbid-12-2", 21), notice("outbid-12-3", 22),
			notice("unsold-13", seller),
			notice("outbid-14-6", bidderX), notice("won-14", bidderZ), notice("lost-14-101", bidderX),
			notice("lost-14-102", bidderY), notice("sold-14", seller),
			notice("lost-15-7", 7), notice("unsold-15", seller),
			notice("won-16", 9), notice("sold-16", seller),
		},
		// The pipeline drained at +20s.
		ClosedBy: at(20 * time.Second),
	}
}

// clone copies the slices and maps a plant may change.
func clone(d Dataset) Dataset {
	d.Auctions = slices.Clone(d.Auctions)
	d.Records = slices.Clone(d.Records)
	d.Rows = slices.Clone(d.Rows)
	d.Bids = slices.Clone(d.Bids)
	d.Outbox = slices.Clone(d.Outbox)
	r := map[int64]RedisState{}
	for k, v := range d.Redis {
		r[k] = v
	}
	d.Redis = r
	return d
}

func findBid(d *Dataset, auction, seq int64) *BidRow {
	for i := range d.Bids {
		if d.Bids[i].AuctionID == auction && d.Bids[i].Seq == seq {
			return &d.Bids[i]
		}
	}
	panic("no such bid")
}

func byID(checks []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range checks {
		m[c.ID] = c
	}
	return m
}

func findRow(d *Dataset, id int64) *AuctionRow {
	for i := range d.Rows {
		if d.Rows[i].ID == id {
			return &d.Rows[i]
		}
	}
	panic("no such auction row")
}

// findRecord is the first record of key k with outcome o.
func findRecord(d *Dataset, k uuid.UUID, o Outcome) *Record {
	for i := range d.Records {
		if d.Records[i].Key == k && d.Records[i].Outcome == o {
			return &d.Records[i]
		}
	}
	panic("no such record")
}

// setEvent replaces auction id's auction-closed event.
func setEvent(d *Dataset, e OutboxRow) {
	for i := range d.Outbox {
		if d.Outbox[i].AggregateID == e.AggregateID {
			d.Outbox[i] = e
			return
		}
	}
	panic("no such event")
}

func TestAuditCleanDatasetPasses(t *testing.T) {
	checks := Audit(cleanDataset())
	if len(checks) != 14 {
		t.Fatalf("%d checks, want 14", len(checks))
	}
	for _, c := range checks {
		if !c.Pass || c.Failed != 0 {
			t.Errorf("%s FAILED on a clean data set: %v", c.ID, c.Examples)
		}
		if c.Checked == 0 {
			t.Errorf("%s checked nothing: the clean data set does not exercise it", c.ID)
		}
	}
}

// TestAuditCatchesPlantedFaults plants one fault at a time and wants the
// check that guards it to FAIL.
func TestAuditCatchesPlantedFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  string // the check that must fail
		plant func(d *Dataset)
	}{
		{"lost bid: a 201 missing from the table", CheckPersisted, func(d *Dataset) {
			d.Bids = slices.DeleteFunc(d.Bids, func(b BidRow) bool { return b.RequestID == key(2) })
		}},
		{"lost hot bid: the persister never wrote it", CheckPersisted, func(d *Dataset) {
			d.Bids = slices.DeleteFunc(d.Bids, func(b BidRow) bool { return b.RequestID == key(3) })
		}},
		{"lost bid seen only through its replay (first attempt timed out)", CheckIdempotency, func(d *Dataset) {
			d.Bids = slices.DeleteFunc(d.Bids, func(b BidRow) bool { return b.RequestID == key(5) })
		}},
		{"persisted with another bidder", CheckPersisted, func(d *Dataset) { findBid(d, auctionHot, 2).BidderID = 99 }},
		{"persisted with another amount", CheckPersisted, func(d *Dataset) { findBid(d, auctionHot, 1).Amount = "1001.01" }},
		{"a proxy bid persisted with another maximum", CheckPersisted, func(d *Dataset) {
			findBid(d, auctionProxy, 6).MaxAmount = "2100.00"
		}},
		{"a proxy bid persisted as a straight one", CheckPersisted, func(d *Dataset) {
			b := findBid(d, auctionProxy, 4)
			b.Kind, b.MaxAmount = rowStraight, ""
		}},
		{"persisted at another amount than answered", CheckPersisted, func(d *Dataset) {
			findRecord(d, key(101), Created).RowAmount = "1020.00"
		}},
		{"late acceptance: at the end in force", CheckBeforeEnd, func(d *Dataset) {
			findBid(d, auctionCold, 1).AcceptedAt = at(10 * time.Second)
		}},
		{"late acceptance: after an extended end", CheckBeforeEnd, func(d *Dataset) {
			// seq 2 came after the original end; nothing had extended it.
			findBid(d, auctionCold, 1).EndTime = at(10 * time.Second)
			findBid(d, auctionCold, 2).AcceptedAt = at(10200 * time.Millisecond)
		}},
		{"an extension that shortened the auction", CheckBeforeEnd, func(d *Dataset) {
			findBid(d, auctionHot, 2).EndTime = at(time.Minute)
		}},
		{"a buy-now that did not end the auction at once", CheckBeforeEnd, func(d *Dataset) {
			findBid(d, auctionBought, 1).EndTime = at(time.Hour)
		}},
		{"a bid sent after the end was accepted", CheckLateRefused, func(d *Dataset) {
			r := findRecord(d, key(7), Conflict)
			r.Outcome, r.Status, r.Seq = Created, 201, 3
		}},
		{"closed before its end", CheckClosedAfterEnd, func(d *Dataset) {
			findRow(d, auctionCold).ClosedAt = at(10200 * time.Millisecond)
		}},
		{"a bought auction closed before its buy-now", CheckClosedAfterEnd, func(d *Dataset) {
			findRow(d, auctionBought).ClosedAt = at(time.Second / 2)
		}},
		{"wrong winner in the auction-closed event", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionCold, ptr(7), "105.00", 2, nil))
		}},
		{"wrong final price in the event", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionCold, ptr(8), "101.00", 2, nil))
		}},
		{"a winner announced for an auction without bids", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionNoBids, ptr(7), "100.00", 0, nil))
		}},
		{"a winner named below the reserve", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionBelow, ptr(7), "120.00", 1, ptrBoolean(false)))
		}},
		{"the reserve said met below it", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionBelow, nil, "120.00", 1, ptrBoolean(true)))
		}},
		{"no reserve outcome for an auction with a reserve", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionProxy, ptr(bidderZ), "1800.00", 7, nil))
		}},
		{"the proxy leader's maximum as the final price", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionProxy, ptr(bidderZ), "2500.00", 7, ptrBoolean(true)))
		}},
		{"the buyer not the winner", CheckWinner, func(d *Dataset) {
			setEvent(d, closedEvent(auctionBought, ptr(10), "500.00", 1, nil))
		}},
		{"closed twice: two events", CheckWinner, func(d *Dataset) { d.Outbox = append(d.Outbox, d.Outbox[0]) }},
		{"an event for an open auction", CheckWinner, func(d *Dataset) {
			d.Outbox = append(d.Outbox, closedEvent(auctionHot, ptr(23), "1003.50", 3, nil))
		}},
		{"wrong leader on the row", CheckLeader, func(d *Dataset) { findRow(d, auctionCold).LeaderID = 7 }},
		{"a wrong leader: a tie given to the later maximum", CheckLeader, func(d *Dataset) {
			// After seq 5, X leads at 1500: of two equal maxima, X's came
			// first. The row names Y.
			d.Bids = slices.DeleteFunc(d.Bids, func(b BidRow) bool { return b.AuctionID == auctionProxy && b.Seq > 5 })
			d.Outbox = slices.DeleteFunc(d.Outbox, func(o OutboxRow) bool { return o.AggregateID == auctionProxy })
			r := findRow(d, auctionProxy)
			r.Status, r.ClosedAt, r.BidCount = "OPEN", time.Time{}, 5
			r.CurrentPrice, r.LeaderID, r.LeaderMax = "1500.00", bidderY, "1500.00"
		}},
		{"price not the rules'", CheckLeader, func(d *Dataset) { findRow(d, auctionHot).CurrentPrice = "1002.00" }},
		{"a proxy leader's row priced at their maximum", CheckLeader, func(d *Dataset) {
			findRow(d, auctionProxy).CurrentPrice = "2500.00"
		}},
		{"the row's hidden maximum not the leader's", CheckLeader, func(d *Dataset) {
			findRow(d, auctionProxy).LeaderMax = "2000.00"
		}},
		{"an ended auction left open", CheckEndedClosed, func(d *Dataset) {
			r := findRow(d, auctionNoBids)
			r.Status, r.ClosedAt = "OPEN", time.Time{}
			d.Outbox = slices.DeleteFunc(d.Outbox, func(o OutboxRow) bool { return o.AggregateID == auctionNoBids })
		}},
		{"a bought auction left open", CheckEndedClosed, func(d *Dataset) {
			r := findRow(d, auctionBought)
			r.Status, r.ClosedAt = "OPEN", time.Time{}
			d.Outbox = slices.DeleteFunc(d.Outbox, func(o OutboxRow) bool { return o.AggregateID == auctionBought })
		}},
		{"Redis disagrees with the table", CheckRedis, func(d *Dataset) {
			s := d.Redis[auctionHot]
			s.Leader = 22
			d.Redis[auctionHot] = s
		}},
		{"Redis has another leader's maximum", CheckRedis, func(d *Dataset) {
			s := d.Redis[auctionHot]
			s.Lmax = "1002.00"
			d.Redis[auctionHot] = s
		}},
		{"amounts not rising by the increment", CheckRising, func(d *Dataset) {
			findBid(d, auctionHot, 3).Amount = "1002.50"
			findRow(d, auctionHot).CurrentPrice = "1002.50"
		}},
		{"a gap in seq", CheckRising, func(d *Dataset) { findBid(d, auctionHot, 3).Seq = 4 }},
		{"a leader's raise that moved the price", CheckRising, func(d *Dataset) {
			findBid(d, auctionProxy, 7).Amount = "1810.00"
		}},
		{"an automatic bid more than the increment above the bid", CheckRising, func(d *Dataset) {
			findBid(d, auctionProxy, 3).Amount = "1220.00"
		}},
		{"rules: a wrong automatic price", CheckRules, func(d *Dataset) {
			findBid(d, auctionProxy, 3).Amount = "1205.00" // min(1500, 1200 + 10) = 1210
		}},
		{"rules: an automatic bid by another than the leader", CheckRules, func(d *Dataset) {
			findBid(d, auctionProxy, 5).BidderID = bidderZ
		}},
		{"rules: an automatic row with a request id not derived from the bid's", CheckRules, func(d *Dataset) {
			findBid(d, auctionProxy, 3).RequestID = key(200)
		}},
		{"rules: a bid the leader's maximum covers, not answered", CheckRules, func(d *Dataset) {
			d.Bids = slices.DeleteFunc(d.Bids, func(b BidRow) bool { return b.AuctionID == auctionProxy && b.Seq == 3 })
			for i := range d.Bids {
				if d.Bids[i].AuctionID == auctionProxy && d.Bids[i].Seq > 3 {
					d.Bids[i].Seq--
				}
			}
		}},
		{"rules: a tie won by the later maximum", CheckRules, func(d *Dataset) {
			// Y's proxy at X's maximum recorded as leading: no automatic row.
			findBid(d, auctionProxy, 5).Kind = rowStraight
			findBid(d, auctionProxy, 5).BidderID = bidderY
		}},
		{"rules: a proxy that took the lead at its maximum", CheckRules, func(d *Dataset) {
			findBid(d, auctionProxy, 1).Amount = "1500.00" // leads at start + increment
		}},
		{"rules: the reserve jump missed", CheckRules, func(d *Dataset) {
			findBid(d, auctionProxy, 6).Amount = "1510.00"
			findBid(d, auctionProxy, 7).Amount = "1510.00"
		}},
		{"rules: the leader's straight bid accepted", CheckRules, func(d *Dataset) {
			d.Bids = append(d.Bids, BidRow{AuctionID: auctionProxy, BidderID: bidderZ, Amount: "1900.00", Kind: rowStraight,
				RequestID: key(106), Seq: 8, AcceptedAt: at(4 * time.Second), EndTime: at(10 * time.Second)})
		}},
		{"rules: a maximum not raised accepted", CheckRules, func(d *Dataset) {
			d.Bids = append(d.Bids, BidRow{AuctionID: auctionProxy, BidderID: bidderZ, Amount: "1800.00", Kind: rowProxy,
				MaxAmount: "2400.00", RequestID: key(107), Seq: 8, AcceptedAt: at(4 * time.Second), EndTime: at(10 * time.Second)})
		}},
		{"rules: a bid after a buy-now", CheckRules, func(d *Dataset) {
			d.Bids = append(d.Bids, BidRow{AuctionID: auctionBought, BidderID: 10, Amount: "501.00", Kind: rowStraight,
				RequestID: key(10), Seq: 2, AcceptedAt: at(time.Second), EndTime: at(time.Second)})
		}},
		{"rules: a buy-now after a bid", CheckRules, func(d *Dataset) {
			for i := range d.Auctions {
				if d.Auctions[i].ID == auctionBelow {
					d.Auctions[i].BuyNowPrice = "500.00"
				}
			}
			d.Bids = append(d.Bids, BidRow{AuctionID: auctionBelow, BidderID: 10, Amount: "500.00", Kind: rowBuyNow,
				RequestID: key(11), Seq: 2, AcceptedAt: at(2 * time.Second), EndTime: at(2 * time.Second)})
		}},
		{"rules: a buy-now at another price", CheckRules, func(d *Dataset) { findBid(d, auctionBought, 1).Amount = "400.00" }},
		{"rules: answered as leading when the leader's proxy answered", CheckRules, func(d *Dataset) {
			findRecord(d, key(102), Created).Leading = true
		}},
		{"rules: a replay answered with another price than the original", CheckRules, func(d *Dataset) {
			findRecord(d, key(102), Replayed).CurrentPrice = "1500.00"
		}},
		{"hidden: the leader's maximum in another bidder's answer", CheckHidden, func(d *Dataset) {
			findRecord(d, key(102), Created).ShownMax = "1500.00" // X's
		}},
		{"hidden: a proxy bidder shown a maximum not their own", CheckHidden, func(d *Dataset) {
			findRecord(d, key(104), Created).ShownMax = "2500.00"
		}},
		{"hidden: a refusal showing the leader's maximum", CheckHidden, func(d *Dataset) {
			findRecord(d, key(106), Conflict).ShownMax = "2500.00"
		}},
		{"hidden: a proxy's answer without its own maximum", CheckHidden, func(d *Dataset) {
			findRecord(d, key(101), Created).ShownMax = ""
		}},
		{"duplicate: two rows for one key", CheckIdempotency, func(d *Dataset) {
			dup := *findBid(d, auctionHot, 2)
			dup.Seq, dup.Amount = 4, "1010.00"
			d.Bids = append(d.Bids, dup)
		}},
		{"duplicate: a bid answered twice by the leader's proxy", CheckIdempotency, func(d *Dataset) {
			dup := *findBid(d, auctionProxy, 3)
			dup.Seq = 8
			d.Bids = append(d.Bids, dup)
		}},
		{"duplicate: a replay with another seq", CheckIdempotency, func(d *Dataset) {
			d.Records[4].Seq = 3
		}},
		{"duplicate: two 201s for one key", CheckIdempotency, func(d *Dataset) {
			d.Records[4].Outcome, d.Records[4].Status = Created, 201
		}},
		{"a replay of a bid the table does not hold", CheckIdempotency, func(d *Dataset) {
			r := d.Records[4]
			r.Key = key(42)
			d.Records = append(d.Records, r)
		}},
		{"an identical retry refused as a reused key", CheckIdempotency, func(d *Dataset) {
			r := d.Records[4]
			r.Outcome, r.Status, r.Code = OtherStatus, 422, "idempotency_key_reused"
			d.Records = append(d.Records, r)
		}},
		{"a bid refused for its token", CheckAuthorized, func(d *Dataset) {
			r := d.Records[0]
			r.Key, r.Outcome, r.Status, r.Code, r.Seq = key(43), OtherStatus, 401, "unauthenticated", 0
			d.Records = append(d.Records, r)
		}},
		{"a seller's own bid", CheckAuthorized, func(d *Dataset) {
			r := d.Records[0]
			r.Key, r.Outcome, r.Status, r.Code, r.Seq = key(44), OtherStatus, 403, "self_bidding", 0
			d.Records = append(d.Records, r)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := clone(cleanDataset())
			tc.plant(&d)
			c, ok := byID(Audit(d))[tc.want]
			if !ok {
				t.Fatalf("no check %q", tc.want)
			}
			if c.Pass || c.Failed == 0 {
				t.Fatalf("%s passed with the fault planted", tc.want)
			}
			if len(c.Examples) == 0 {
				t.Errorf("%s failed without an example", tc.want)
			}
			t.Logf("%s: %v", tc.want, c.Examples)
		})
	}
}

// The notice audit catches a notice missing, stored twice, sent to the
// wrong user, or sent for no reason (to a bidder a proxy answered).
func TestAuditNotices(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(d *Dataset)
	}{
		{"missing", func(d *Dataset) { d.Notices = d.Notices[1:] }},
		{"twice", func(d *Dataset) { d.Notices = append(d.Notices, d.Notices[0]) }},
		{"to another user", func(d *Dataset) { d.Notices[0].UserID = 8 }},
		{"for an answered bid", func(d *Dataset) { d.Notices = append(d.Notices, notice("outbid-14-2", bidderX)) }},
		{"to the seller of an open auction", func(d *Dataset) { d.Notices = append(d.Notices, notice("sold-12", 900)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := cleanDataset()
			tc.plant(&d)
			for _, c := range Audit(d) {
				if c.ID == CheckNotices && c.Pass {
					t.Fatalf("the notice audit passed with a notice %s", tc.name)
				}
			}
		})
	}
}
