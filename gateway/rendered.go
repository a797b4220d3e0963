package gateway

import (
	stdjson "encoding/json"
	"sync/atomic"

	"bidgate"
)

// renderedSlots is how many auctions' encoded answers a node keeps: a
// direct-mapped table (by id), so it costs a fixed 1024 pointers and a lost
// slot only costs one encoding.
const renderedSlots = 1024

// rendered keeps the encoded GET answer of recently read auctions under
// their ETag: the thousands of reads of a watched auction between two of
// its bids encode it once. The ETag names the auction, its view (public or
// insider's) and moves with every field of the answer, so an answer kept
// under the same ETag is the same, and one view's never serves the other.
type rendered struct {
	slots [renderedSlots]atomic.Pointer[renderedAuction]
}

type renderedAuction struct {
	tag  string
	body []byte // never written to once stored: fasthttp copies it
}

// body is a's answer in the insider's view or the public one, encoded,
// whose ETag is tag.
func (r *rendered) body(a bidgate.Auction, tag string, insider bool) []byte {
	slot := &r.slots[uint64(a.ID)%renderedSlots]
	if kept := slot.Load(); kept != nil && kept.tag == tag {
		return kept.body
	}
	resp := publicAuctionResponse(a)
	if insider {
		resp = newAuctionResponse(a)
	}
	b, err := stdjson.Marshal(resp)
	if err != nil {
		panic(err) // only our own types are written
	}
	slot.Store(&renderedAuction{tag: tag, body: b})
	return b
}
