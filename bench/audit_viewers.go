package bench

import (
	"fmt"

	"bidgate"
)

// Invariant 4, as viewers see it: per viewer, no message goes back (a
// lower seq after a higher one, a lower price, or another price at a seq
// already shown); the same seq again is fine.
func checkViewerOrder(logs []ViewerLog) Check {
	c := Check{ID: CheckViewerOrder, Invariant: 4, Name: "no WebSocket viewer saw the seq or the price go backwards"}
	for _, l := range logs {
		c.Checked += int(l.Messages)
		c.Failed += l.Backwards
		for _, ex := range l.Examples {
			if len(c.Examples) < maxExamples {
				c.Examples = append(c.Examples, fmt.Sprintf("viewer %d of auction %d (target %d): %s", l.Viewer, l.AuctionID, l.Target+1, ex))
			}
		}
	}
	return c.done()
}

// Invariant 3, as viewers see it: every viewer that stayed connected got
// the closed message, and it shows the database's final state (CLOSED,
// price, leader, bid count). A viewer the server dropped is reported with
// the viewers, not here.
func checkViewerFinal(ix *index, logs []ViewerLog) Check {
	c := Check{ID: CheckViewerFinal, Invariant: 3, Name: "every viewer that stayed connected got the closed message, equal to the database's final state"}
	for _, l := range logs {
		if l.Dropped != "" {
			continue
		}
		c.Checked++
		f, r := l.Final, ix.rows[l.AuctionID]
		leader := "" // the alias of the database's leader, by its rows
		if r != nil && r.LeaderID != 0 {
			leader = bidgate.AliasName(aliasesOf(ix.bids[l.AuctionID])[r.LeaderID])
		}
		switch {
		case f == nil:
			c.fail("viewer %d of auction %d (target %d): no closed message after %d messages", l.Viewer, l.AuctionID, l.Target+1, l.Messages)
		case r == nil:
			c.fail("viewer %d of auction %d: a closed message, but the auction has no row", l.Viewer, l.AuctionID)
		case r.Status != string(bidgate.StatusClosed) || f.Status != r.Status || !sameMoney(f.Price, r.CurrentPrice) ||
			f.Leader != leader || f.BidCount != r.BidCount:
			c.fail("viewer %d of auction %d (target %d): closed message %s at %s led by %q with %d bids; the database has %s at %s led by %d (%q) with %d bids",
				l.Viewer, l.AuctionID, l.Target+1, f.Status, f.Price, f.Leader, f.BidCount, r.Status, r.CurrentPrice, r.LeaderID, leader, r.BidCount)
		}
	}
	return c.done()
}

// aliasesOf numbers an auction's bidders by their first row, as bidgate
// names leaders to viewers.
func aliasesOf(rows []BidRow) map[int64]int64 {
	bids := make([]bidgate.Bid, len(rows))
	for i, r := range rows {
		bids[i] = bidgate.Bid{BidderID: r.BidderID, Seq: r.Seq}
	}
	return bidgate.AliasesOf(bids)
}
