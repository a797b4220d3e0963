package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// TestEveryRuleInOneBatch: one script call decides a batch that exercises
// every rule, in order, and logs the rows the rules make (automatic rows
// under the request id bidgate.AutomaticRequestID derives, so Lua and Go
// agree on it). Replays, within the batch, from a later batch and from
// records Load wrote, answer like the original.
func TestEveryRuleInOneBatch(t *testing.T) {
	rs := redisstore.New(testredis.Client(t))
	a := scratch(t, rs) // start 100, increment 1, seller 1
	a.ReservePrice = decimal.NewNullDecimal(decimal.NewFromInt(150))
	if _, err := rs.Load(ctx, a, nil, true); err != nil {
		t.Fatal(err)
	}
	req := func(bidder int64, value string, proxy bool) bidgate.BidRequest {
		return bidgate.BidRequest{AuctionID: a.ID, BidderID: bidder, Amount: decimal.RequireFromString(value),
			Proxy: proxy, RequestID: uuid.New()}
	}
	first, answered := req(2, "120", true), req(3, "110", false)
	reused := first
	reused.BidderID, reused.Amount = 6, decimal.NewFromInt(300)
	type want struct {
		err     error
		seq     int64
		amount  string
		leading bool
		price   string
	}
	batch := []struct {
		name string
		req  bidgate.BidRequest
		want want
	}{
		{"rule 2: a first proxy leads at start + inc", first, want{seq: 1, amount: "101", leading: true, price: "101"}},
		{"rule 3: a straight bid under the maximum is answered", answered, want{seq: 2, amount: "110", price: "111"}},
		{"rule 1: the leader's straight bid", req(2, "130", false), want{err: bidgate.ErrAlreadyLeading}},
		{"rule 1: the leader's maximum not raised", req(2, "115", true), want{err: bidgate.ErrMaxNotRaised}},
		{"rule 1: the leader raises the maximum; the price stays", req(2, "140", true), want{seq: 4, amount: "111", leading: true, price: "111"}},
		{"rule 3: a tie; the earlier maximum wins", req(4, "140", true), want{seq: 5, amount: "140", price: "140"}},
		{"too low", req(5, "140", false), want{err: bidgate.ErrBidTooLow}},
		{"rule 2 and the reserve: the price jumps to it", req(5, "200", true), want{seq: 7, amount: "150", leading: true, price: "150"}},
		{"the seller", req(1, "500", false), want{err: bidgate.ErrSelfBidding}},
		{"a replay within the batch", answered, want{seq: 2, amount: "110", price: "111"}},
		{"a reused key", reused, want{err: bidgate.ErrIdempotencyKeyReused}},
	}
	reqs := make([]bidgate.BidRequest, len(batch))
	for i, b := range batch {
		reqs[i] = b.req
	}
	sum, out, err := rs.DecideBids(ctx, a.ID, reqs)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, d redisstore.Decision, w want) {
		t.Helper()
		if w.err != nil {
			if !errors.Is(d.Err, w.err) {
				t.Errorf("%s: got %+v, want %v", name, d, w.err)
			}
			return
		}
		r := d.Result
		if d.Err != nil || r.Bid.Seq != w.seq || !r.Bid.Amount.Equal(decimal.RequireFromString(w.amount)) ||
			r.Leading != w.leading || !r.CurrentPrice.Equal(decimal.RequireFromString(w.price)) {
			t.Errorf("%s: got %+v (err %v), want %+v", name, r, d.Err, w)
		}
	}
	for i, b := range batch {
		check(b.name, out[i], b.want)
	}
	if sum.PriceCents != 15000 || sum.LeaderID != 5 || sum.Seq != 7 {
		t.Fatalf("summary %+v", sum)
	}

	log, err := rs.ReadLog(ctx, a.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range log {
		got = append(got, fmt.Sprintf("%d %d %s %s %s", b.Seq, b.BidderID, b.Amount, b.Kind, b.MaxAmount))
	}
	wantLog := []string{"1 2 101.00 proxy 120.00", "2 3 110.00 straight ", "3 2 111.00 automatic ",
		"4 2 111.00 proxy 140.00", "5 4 140.00 proxy 140.00", "6 2 140.00 automatic ", "7 5 150.00 proxy 200.00"}
	if fmt.Sprint(got) != fmt.Sprint(wantLog) {
		t.Fatalf("log\n got %q\nwant %q", got, wantLog)
	}
	if log[2].RequestID != bidgate.AutomaticRequestID(answered.RequestID).String() ||
		log[5].RequestID != bidgate.AutomaticRequestID(batch[5].req.RequestID).String() {
		t.Fatalf("automatic rows' request ids %s, %s", log[2].RequestID, log[5].RequestID)
	}
	for _, b := range log {
		if err := b.Validate(); err != nil {
			t.Fatalf("log entry %d: %v", b.Seq, err)
		}
	}

	// A later batch answers the replay from its record.
	_, out, err = rs.DecideBids(ctx, a.ID, []bidgate.BidRequest{answered})
	if err != nil {
		t.Fatal(err)
	}
	check("a replay in a later batch", out[0], batch[1].want)

	// So does a state loaded from the rows PostgreSQL would hold.
	bids := make([]bidgate.Bid, len(log))
	for i, e := range log {
		bids[i] = bidgate.Bid{BidderID: e.BidderID, Amount: decimal.RequireFromString(e.Amount), Kind: e.Kind,
			RequestID: uuid.MustParse(e.RequestID), Seq: e.Seq, AcceptedAt: e.AcceptedAt, EndTime: e.EndTime}
		if e.MaxAmount != "" {
			bids[i].MaxAmount = decimal.NewNullDecimal(decimal.RequireFromString(e.MaxAmount))
		}
	}
	b := scratch(t, rs, bids...)
	answered.AuctionID = b.ID
	_, out, err = rs.DecideBids(ctx, b.ID, []bidgate.BidRequest{answered})
	if err != nil {
		t.Fatal(err)
	}
	check("a replay of a loaded record", out[0], batch[1].want)
}

// TestBuyNowScript: a buy-now closes an auction with no bid at once, by
// Redis's clock; it is answered as a replay after, and refused once a bid
// was accepted or without a price.
func TestBuyNowScript(t *testing.T) {
	rs := redisstore.New(testredis.Client(t))
	a := scratch(t, rs)
	a.BuyNowPrice = decimal.NewNullDecimal(decimal.NewFromInt(500))
	if _, err := rs.Load(ctx, a, nil, true); err != nil {
		t.Fatal(err)
	}
	buy := bidgate.BidRequest{AuctionID: a.ID, BidderID: 7, BuyNow: true, RequestID: uuid.New()}
	before := time.Now()
	d, err := rs.BuyNow(ctx, buy)
	if err != nil || d.Err != nil {
		t.Fatalf("buy-now: %+v, %v", d, err)
	}
	bid := d.Result.Bid
	if bid.Kind != bidgate.KindBuyNow || bid.Seq != 1 || !bid.Amount.Equal(decimal.NewFromInt(500)) ||
		!bid.EndTime.Equal(bid.AcceptedAt) || bid.EndTime.Before(before.Add(-time.Second)) {
		t.Fatalf("bought: %+v", bid)
	}
	st, err := rs.State(ctx, a.ID)
	if err != nil || st.Status != bidgate.StatusClosed || st.LeaderID != 7 || st.PriceCents != 50000 {
		t.Fatalf("state after: %+v, %v", st, err)
	}
	if d, err := rs.BuyNow(ctx, buy); err != nil || !d.Result.Replayed {
		t.Fatalf("replay: %+v, %v", d, err)
	}
	other := buy
	other.RequestID = uuid.New()
	if d, err := rs.BuyNow(ctx, other); err != nil || !errors.Is(d.Err, bidgate.ErrAuctionClosed) {
		t.Fatalf("a second buyer: %+v, %v", d, err)
	}

	c := scratch(t, rs)
	c.BuyNowPrice = a.BuyNowPrice
	if _, err := rs.Load(ctx, c, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, out, err := rs.DecideBids(ctx, c.ID, []bidgate.BidRequest{{AuctionID: c.ID, BidderID: 8,
		Amount: decimal.NewFromInt(101), RequestID: uuid.New()}}); err != nil || out[0].Err != nil {
		t.Fatalf("first bid: %+v, %v", out, err)
	}
	other.AuctionID = c.ID
	if d, err := rs.BuyNow(ctx, other); err != nil || !errors.Is(d.Err, bidgate.ErrBuyNowUnavailable) {
		t.Fatalf("after a bid: %+v, %v", d, err)
	}
}
