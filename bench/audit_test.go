package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate"
)

var t0 = time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func key(n int) uuid.UUID { return uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)) }

func closedEvent(id int64, winner *int64, price string, bids int64) OutboxRow {
	b, _ := json.Marshal(bidgate.AuctionClosed{AuctionID: id, WinnerID: winner, FinalPrice: price, ClosedAt: at(11 * time.Second), BidCount: bids})
	return OutboxRow{AggregateID: id, Topic: TopicAuctionClosed, Payload: string(b)}
}

func ptr(n int64) *int64 { return &n }

// cleanDataset is a consistent run: a cold auction extended by a late bid
// and closed, a hot auction still open with its Redis state, and a cold
// auction that ended without bids. Every check has something to look at.
func cleanDataset() Dataset {
	const a, b, c = 11, 12, 13
	bids := []BidRow{
		{AuctionID: a, BidderID: 7, Amount: "101.00", RequestID: key(1), Seq: 1, AcceptedAt: at(time.Second), EndTime: at(10 * time.Second)},
		// In the last second of a 1s window: extended to its time + 1s.
		{AuctionID: a, BidderID: 8, Amount: "105.00", RequestID: key(2), Seq: 2, AcceptedAt: at(9500 * time.Millisecond), EndTime: at(10500 * time.Millisecond)},
		{AuctionID: b, BidderID: 21, Amount: "1001.00", RequestID: key(3), Seq: 1, AcceptedAt: at(2 * time.Second), EndTime: at(time.Hour)},
		{AuctionID: b, BidderID: 22, Amount: "1002.00", RequestID: key(4), Seq: 2, AcceptedAt: at(2 * time.Second), EndTime: at(time.Hour)},
		{AuctionID: b, BidderID: 23, Amount: "1003.50", RequestID: key(5), Seq: 3, AcceptedAt: at(3 * time.Second), EndTime: at(time.Hour)},
	}
	rec := func(b BidRow, o Outcome, kind Kind) Record {
		r := Record{AuctionID: b.AuctionID, Key: b.RequestID, BidderID: b.BidderID, Amount: b.Amount, Kind: kind,
			Outcome: o, Intended: b.AcceptedAt, Sent: b.AcceptedAt, Latency: time.Millisecond}
		switch o {
		case Created, Replayed:
			r.Status, r.Seq, r.AcceptedAt, r.EndTime = 200, b.Seq, b.AcceptedAt, b.EndTime
			if o == Created {
				r.Status = 201
			}
		case Conflict:
			r.Status, r.Code = 409, "bid_too_low"
		case PlannedTimeout:
			r.Err = "timeout"
		}
		return r
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
	}
	late := rec(BidRow{AuctionID: a, BidderID: 9, Amount: "999.00", RequestID: key(7), AcceptedAt: at(12 * time.Second)}, Conflict, KindLate)
	late.Code = "auction_closed"
	records = append(records, late)
	return Dataset{
		Auctions: []AuctionSpec{
			{ID: a, StartPrice: "100.00", MinIncrement: "1.00", OriginalEnd: at(10 * time.Second)},
			{ID: b, Hot: true, StartPrice: "1000.00", MinIncrement: "1.00", OriginalEnd: at(time.Hour)},
			{ID: c, StartPrice: "100.00", MinIncrement: "1.00", OriginalEnd: at(5 * time.Second)},
		},
		Records: records,
		Rows: []AuctionRow{
			{ID: a, Status: "CLOSED", Mode: "COLD", StartPrice: "100.00", CurrentPrice: "105.00", MinIncrement: "1.00",
				LeaderID: 8, BidCount: 2, EndTime: at(10500 * time.Millisecond), ClosedAt: at(11 * time.Second)},
			{ID: b, Status: "OPEN", Mode: "HOT", StartPrice: "1000.00", CurrentPrice: "1003.50", MinIncrement: "1.00",
				LeaderID: 23, BidCount: 3, EndTime: at(time.Hour)},
			{ID: c, Status: "CLOSED", Mode: "COLD", StartPrice: "100.00", CurrentPrice: "100.00", MinIncrement: "1.00",
				EndTime: at(5 * time.Second), ClosedAt: at(6 * time.Second)},
		},
		Bids:   bids,
		Outbox: []OutboxRow{closedEvent(a, ptr(8), "105.00", 2), closedEvent(c, nil, "100.00", 0)},
		Redis:  map[int64]RedisState{b: {Price: "1003.50", Leader: 23, Seq: 3, End: at(time.Hour), Status: "OPEN"}},
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

func TestAuditCleanDatasetPasses(t *testing.T) {
	checks := Audit(cleanDataset())
	if len(checks) != 11 {
		t.Fatalf("%d checks, want 11", len(checks))
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
		{"persisted with another bidder", CheckPersisted, func(d *Dataset) { findBid(d, 12, 2).BidderID = 99 }},
		{"persisted with another amount", CheckPersisted, func(d *Dataset) { findBid(d, 12, 1).Amount = "1001.01" }},
		{"late acceptance: at the end in force", CheckBeforeEnd, func(d *Dataset) {
			findBid(d, 11, 1).AcceptedAt = at(10 * time.Second)
		}},
		{"late acceptance: after an extended end", CheckBeforeEnd, func(d *Dataset) {
			// seq 2 came after the original end; nothing had extended it.
			findBid(d, 11, 1).EndTime = at(10 * time.Second)
			findBid(d, 11, 2).AcceptedAt = at(10200 * time.Millisecond)
		}},
		{"an extension that shortened the auction", CheckBeforeEnd, func(d *Dataset) {
			findBid(d, 12, 2).EndTime = at(time.Minute)
		}},
		{"a bid sent after the end was accepted", CheckLateRefused, func(d *Dataset) {
			r := &d.Records[len(d.Records)-1]
			r.Outcome, r.Status, r.Seq = Created, 201, 3
		}},
		{"closed before its end", CheckClosedAfterEnd, func(d *Dataset) { d.Rows[0].ClosedAt = at(10200 * time.Millisecond) }},
		{"wrong winner in the auction-closed event", CheckWinner, func(d *Dataset) {
			d.Outbox[0] = closedEvent(11, ptr(7), "105.00", 2)
		}},
		{"wrong final price in the event", CheckWinner, func(d *Dataset) {
			d.Outbox[0] = closedEvent(11, ptr(8), "101.00", 2)
		}},
		{"a winner announced for an auction without bids", CheckWinner, func(d *Dataset) {
			d.Outbox[1] = closedEvent(13, ptr(7), "100.00", 0)
		}},
		{"closed twice: two events", CheckWinner, func(d *Dataset) { d.Outbox = append(d.Outbox, d.Outbox[0]) }},
		{"an event for an open auction", CheckWinner, func(d *Dataset) {
			d.Outbox = append(d.Outbox, closedEvent(12, ptr(23), "1003.50", 3))
		}},
		{"wrong leader on the row", CheckLeader, func(d *Dataset) { d.Rows[0].LeaderID = 7 }},
		{"price not the highest bid", CheckLeader, func(d *Dataset) { d.Rows[1].CurrentPrice = "1002.00" }},
		{"an ended auction left open", CheckEndedClosed, func(d *Dataset) {
			d.Rows[2].Status, d.Rows[2].ClosedAt = "OPEN", time.Time{}
			d.Outbox = d.Outbox[:1]
		}},
		{"Redis disagrees with the table", CheckRedis, func(d *Dataset) {
			s := d.Redis[12]
			s.Leader = 22
			d.Redis[12] = s
		}},
		{"amounts not rising by the increment", CheckRising, func(d *Dataset) {
			findBid(d, 12, 3).Amount = "1002.50"
			d.Rows[1].CurrentPrice = "1002.50"
		}},
		{"a gap in seq", CheckRising, func(d *Dataset) { findBid(d, 12, 3).Seq = 4 }},
		{"duplicate: two rows for one key", CheckIdempotency, func(d *Dataset) {
			dup := *findBid(d, 12, 2)
			dup.Seq, dup.Amount = 4, "1010.00"
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
