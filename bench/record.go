package bench

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Outcome is the class of one request's answer, the unit latencies are
// reported by.
type Outcome string

const (
	Created  Outcome = "201" // accepted: leading, or answered by the leader's proxy ("leading": false)
	Replayed Outcome = "200" // the original bid of a repeated Idempotency-Key (or a read's 200)
	// NotModified is a read's 304: the If-None-Match it sent still holds.
	NotModified Outcome = "304"
	// Conflict is a refusal by the auction's rules, never an error: too
	// low, closed, the leader's own straight bid or a maximum not above
	// theirs (already_leading, max_not_raised: a leader bidding again), a
	// buy-now once a bid is in (buy_now_unavailable).
	Conflict    Outcome = "409"
	RateLimited Outcome = "429"       // the bidder's token bucket
	ServerError Outcome = "5xx"       // 500, 503 unavailable or overloaded
	OtherStatus Outcome = "other"     // any other status: 400, 404, 422, ...
	Transport   Outcome = "transport" // no answer: connection error or the normal client timeout
	// PlannedTimeout is a deliberate short client timeout; the request is
	// retried with the same key, and the retry tells what happened.
	PlannedTimeout Outcome = "timeout"
)

// Outcomes lists every class in report order.
var Outcomes = []Outcome{Created, Replayed, NotModified, Conflict, RateLimited, ServerError, OtherStatus, Transport, PlannedTimeout}

// IsError reports the classes that stop a ramp: 5xx and transport errors.
// A refusal (409, whatever its code) is an answer, not an error.
func (o Outcome) IsError() bool { return o == ServerError || o == Transport }

// Kind says why a request was sent.
type Kind string

const (
	KindBid   Kind = "bid"   // a scheduled bid
	KindRetry Kind = "retry" // the same key, bidder and terms again
	KindLate  Kind = "late"  // sent after the auction's known end; must be refused
	KindRead  Kind = "read"  // GET /auctions/{id} (the reads scenario)
)

// Record is one request as the harness sent it and saw it answered.
// Latency runs from Intended (the scheduled send time, whatever kept the
// request waiting) to the end of the answer.
type Record struct {
	AuctionID int64     `json:"auctionId"`
	Key       uuid.UUID `json:"idempotencyKey"`
	BidderID  int64     `json:"bidderId"`
	// The request's terms: an amount (a straight bid), a maxAmount (a
	// proxy bid), or neither (a buy-now).
	Amount    string `json:"amount"`
	MaxAmount string `json:"maxAmount,omitempty"`
	BuyNow    bool   `json:"buyNow,omitempty"`
	Kind      Kind   `json:"kind"`
	Step      int    `json:"step,omitempty"`
	// ShortTimeout marks an attempt sent with the deliberately short
	// client timeout (its retry follows with the same key).
	ShortTimeout bool          `json:"shortTimeout,omitempty"`
	Target       int           `json:"target"`
	Intended     time.Time     `json:"intendedAt"`
	Sent         time.Time     `json:"sentAt"`
	Latency      time.Duration `json:"latencyNs"`
	Status       int           `json:"status"`
	Outcome      Outcome       `json:"outcome"`
	Code         string        `json:"code,omitempty"`
	Err          string        `json:"error,omitempty"`
	// For 201 and 200: the bid as the store recorded it (its row's seq,
	// times, kind and amount) and the auction right after it was decided.
	Seq          int64     `json:"seq,omitempty"`
	AcceptedAt   time.Time `json:"acceptedAt,omitzero"`
	EndTime      time.Time `json:"endTime,omitzero"`
	RowKind      string    `json:"rowKind,omitempty"`
	RowAmount    string    `json:"rowAmount,omitempty"`
	Leading      bool      `json:"leading,omitempty"`
	CurrentPrice string    `json:"currentPrice,omitempty"`
	// ShownMax is the maxAmount the answer carried, whatever its status
	// (recorded so the audit can tell whether a hidden maximum leaked:
	// only the request's own, in its 201 or 200, may appear).
	ShownMax string `json:"shownMaxAmount,omitempty"`
}

// requestKind is the kind of row the request makes when accepted.
func (r *Record) requestKind() string {
	switch {
	case r.BuyNow:
		return rowBuyNow
	case r.MaxAmount != "":
		return rowProxy
	}
	return rowStraight
}

// describeRequest writes the request's terms for an audit example.
func (r *Record) describeRequest() string {
	switch r.requestKind() {
	case rowBuyNow:
		return "buy-now"
	case rowProxy:
		return "proxy, maximum " + r.MaxAmount
	}
	return "straight " + r.Amount
}

// describe writes an accepted request and its answer for an audit example.
func (r *Record) describe() string {
	return fmt.Sprintf("seq %d bidder %d %s row %s %s", r.Seq, r.BidderID, r.describeRequest(), r.RowKind, r.RowAmount)
}

// describe writes a bid row for an audit example.
func (b BidRow) describe() string {
	s := fmt.Sprintf("seq %d bidder %d %s %s", b.Seq, b.BidderID, b.Kind, b.Amount)
	if b.MaxAmount != "" {
		s += " maximum " + b.MaxAmount
	}
	return s
}

// matches reports whether row b is what the accepted request r asked for
// (bidder, kind, a straight bid's amount, a proxy bid's maximum) and what
// its answer said (seq, and the row's kind and amount when it gave them).
func (r *Record) matches(b BidRow) bool {
	kind := b.Kind
	if kind == "" {
		kind = rowStraight
	}
	switch {
	case b.BidderID != r.BidderID || b.Seq != r.Seq || kind != r.requestKind():
		return false
	case kind == rowStraight && !sameMoney(b.Amount, r.Amount):
		return false
	case kind == rowProxy && !sameMoney(b.MaxAmount, r.MaxAmount):
		return false
	case r.RowKind != "" && r.RowKind != kind:
		return false
	case r.RowAmount != "" && !sameMoney(b.Amount, r.RowAmount):
		return false
	}
	return true
}

// Recorder keeps every record and live counters for the progress bar.
type Recorder struct {
	mu   sync.Mutex
	recs []Record

	done, errors, created atomic.Int64
}

func (r *Recorder) add(rec Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	r.done.Add(1)
	switch {
	case rec.Outcome == Created:
		r.created.Add(1)
	case rec.Outcome.IsError() || rec.Outcome == OtherStatus:
		r.errors.Add(1)
	}
}

// reserve makes room for n more records, so that a step's appends do not
// copy the whole slice again and again.
func (r *Recorder) reserve(n int) {
	r.mu.Lock()
	r.recs = slices.Grow(r.recs, n)
	r.mu.Unlock()
}

// Len is the number of records so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

// From returns a copy of the records from index i on.
func (r *Recorder) From(i int) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i >= len(r.recs) {
		return nil
	}
	return append([]Record(nil), r.recs[i:]...)
}

// Records returns all records (not a copy: call it once the load is over).
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recs
}

// WriteRecords writes recs as gzipped JSON lines to path.
func WriteRecords(path string, recs []Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	bw := bufio.NewWriterSize(zw, 1<<16)
	enc := json.NewEncoder(bw)
	for i := range recs {
		if err := enc.Encode(&recs[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
