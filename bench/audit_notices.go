package bench

import (
	"encoding/json"
	"slices"
	"time"

	"bidgate"
)

// NoticeRow is a row of table notification: a notice the notifier stored.
type NoticeRow struct {
	ID        string
	UserID    int64
	Type      string
	AuctionID int64
	At        time.Time // its cause's store time
}

// CheckNotices is the id of the notice audit.
const CheckNotices = "notices"

// expectedNotices is what the rules say each auction's users were told,
// notice id to user: an outbid to the leader each row took the lead from
// (a row its leader's proxy answered took it from nobody, a leader's own
// raise neither), and at the close won to the event's winner, lost to
// every other bidder, sold or unsold to the seller.
func expectedNotices(ix *index) map[string]int64 {
	want := map[string]int64{}
	for _, s := range ix.specs {
		rows := ix.bids[s.ID]
		var leader int64
		for i, b := range rows {
			if b.Kind == rowAuto {
				leader = b.BidderID
				continue
			}
			if i+1 < len(rows) && rows[i+1].Kind == rowAuto && rows[i+1].Seq == b.Seq+1 {
				continue // answered by the leader's proxy
			}
			if leader != 0 && b.BidderID != leader {
				want[bidgate.NoticeID(bidgate.NoticeOutbid, s.ID, leader, b.Seq)] = leader
			}
			leader = b.BidderID
		}
		r := ix.rows[s.ID]
		events := ix.outbox[s.ID]
		if r == nil || r.Status != string(bidgate.StatusClosed) || len(events) != 1 {
			continue // the winner check says what is wrong with the close
		}
		var ev bidgate.AuctionClosed
		if json.Unmarshal([]byte(events[0].Payload), &ev) != nil {
			continue
		}
		var bidders []int64
		for _, b := range rows {
			if !slices.Contains(bidders, b.BidderID) {
				bidders = append(bidders, b.BidderID)
			}
		}
		for _, b := range bidders {
			if ev.WinnerID != nil && *ev.WinnerID == b {
				want[bidgate.NoticeID(bidgate.NoticeWon, s.ID, b, 0)] = b
			} else {
				want[bidgate.NoticeID(bidgate.NoticeLost, s.ID, b, 0)] = b
			}
		}
		if ev.WinnerID != nil {
			want[bidgate.NoticeID(bidgate.NoticeSold, s.ID, r.SellerID, 0)] = r.SellerID
		} else {
			want[bidgate.NoticeID(bidgate.NoticeUnsold, s.ID, r.SellerID, 0)] = r.SellerID
		}
	}
	return want
}

// Invariant 3 for the users: every notice the rules call for was stored
// exactly once, for its user, and no other.
func checkNotices(ix *index, notices []NoticeRow) Check {
	c := Check{ID: CheckNotices, Invariant: 3, Name: "every outbid told the replaced leader once; every close told its winner (none below the reserve), each other bidder and the seller; nothing else"}
	want := expectedNotices(ix)
	got := map[string]NoticeRow{}
	for _, n := range notices {
		if prior, twice := got[n.ID]; twice {
			c.fail("notice %s stored twice (users %d, %d)", n.ID, prior.UserID, n.UserID)
		}
		got[n.ID] = n
	}
	for _, id := range sortedKeys(want) {
		c.Checked++
		n, ok := got[id]
		switch {
		case !ok:
			c.fail("notice %s to user %d was never stored", id, want[id])
		case n.UserID != want[id]:
			c.fail("notice %s went to user %d, not %d", id, n.UserID, want[id])
		}
	}
	for _, id := range sortedKeys(got) {
		if _, ok := want[id]; !ok {
			c.Checked++
			c.fail("notice %s to user %d: the rules call for no such notice", id, got[id].UserID)
		}
	}
	return c.done()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
