package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

var ctx = context.Background()

// scratch loads a fresh hot auction (an id far past any real auction)
// and deletes its keys after the test.
func scratch(t testing.TB, rs *redisstore.Store, bids ...bidgate.Bid) bidgate.Auction {
	t.Helper()
	a := bidgate.Auction{ID: 1<<52 + time.Now().UnixNano()%1e12, SellerID: 1, CurrentPrice: decimal.NewFromInt(100),
		MinIncrement: decimal.NewFromInt(1), Status: bidgate.StatusOpen, EndTime: time.Now().Add(time.Hour),
		ExtendBy: time.Second, BidCount: int64(len(bids))}
	for i := range bids {
		bids[i].AuctionID = a.ID
	}
	if wrote, err := rs.Load(ctx, a, bids, false); err != nil || !wrote {
		t.Fatalf("load: wrote %v, %v", wrote, err)
	}
	t.Cleanup(func() {
		if err := rs.Delete(context.Background(), a.ID); err != nil {
			t.Error(err)
		}
	})
	return a
}

// TestRecordCodec: a bid Load wrote from Go (as PostgreSQL holds it) is
// recognized by bid_batch.lua's own record parser: the same request is a
// replay with the original seq and times, another amount a reused key.
func TestRecordCodec(t *testing.T) {
	rs := redisstore.New(testredis.Client(t))
	at := time.UnixMicro(1_700_000_000_123_456).UTC()
	stored := bidgate.Bid{BidderID: 42, Amount: decimal.RequireFromString("123.45"), RequestID: uuid.New(),
		Seq: 1, AcceptedAt: at, EndTime: at.Add(time.Hour)}
	a := scratch(t, rs, stored)
	same := bidgate.BidRequest{AuctionID: a.ID, BidderID: 42, Amount: stored.Amount, RequestID: stored.RequestID}
	other := same
	other.Amount = decimal.RequireFromString("123.46")
	_, out, err := rs.DecideBids(ctx, a.ID, []bidgate.BidRequest{same, other})
	if err != nil {
		t.Fatal(err)
	}
	got := out[0].Result
	if out[0].Err != nil || !got.Replayed || got.Bid.Seq != 1 || !got.Bid.AcceptedAt.Equal(at) || !got.Bid.EndTime.Equal(stored.EndTime) {
		t.Fatalf("replay of a loaded bid: %+v", out[0])
	}
	if !errors.Is(out[1].Err, bidgate.ErrIdempotencyKeyReused) {
		t.Fatalf("same key, other amount: %+v", out[1])
	}
}

// TestBatchPublishesState: a batch that accepts bids publishes the state
// after it, in the format ParseUpdate reads; one that accepts none is
// silent.
func TestBatchPublishesState(t *testing.T) {
	rdb := testredis.Client(t)
	rs := redisstore.New(rdb)
	a := scratch(t, rs)
	sub := rdb.SSubscribe(ctx, redisstore.Channel(a.ID))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	bid := func(bidder int64, amount string) bidgate.BidRequest {
		return bidgate.BidRequest{AuctionID: a.ID, BidderID: bidder, Amount: decimal.RequireFromString(amount), RequestID: uuid.New()}
	}
	if _, _, err := rs.DecideBids(ctx, a.ID, []bidgate.BidRequest{bid(2, "50")}); err != nil { // too low
		t.Fatal(err)
	}
	sum, out, err := rs.DecideBids(ctx, a.ID, []bidgate.BidRequest{bid(2, "101"), bid(3, "105.50"), bid(4, "102")})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[1].Err != nil || !errors.Is(out[2].Err, bidgate.ErrBidTooLow) {
		t.Fatalf("outcomes %+v", out)
	}
	recv, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(recv)
	if err != nil {
		t.Fatal(err)
	}
	u, err := redisstore.ParseUpdate(msg.Payload)
	if err != nil {
		t.Fatal(err)
	}
	want := redisstore.Update{AuctionID: a.ID, PriceCents: 10550, LeaderID: 3, LeaderAlias: 2, EndUs: sum.EndUs, Status: bidgate.StatusOpen,
		Seq: 2, UpdatedUs: out[1].Result.Bid.AcceptedAt.UnixMicro()}
	if u != want {
		t.Fatalf("published %+v, want %+v (the first message, so the too-low batch published nothing)", u, want)
	}
}

// A hot auction's aliases continue those of the rows it was loaded with
// (a promotion): a new bidder takes the next number, a known one keeps
// theirs, and the state and its updates name the leader's.
func TestBatchAliases(t *testing.T) {
	rs := redisstore.New(testredis.Client(t))
	at := time.Now()
	row := func(seq, bidder int64) bidgate.Bid {
		return bidgate.Bid{BidderID: bidder, Amount: decimal.NewFromInt(100 + seq), Seq: seq, RequestID: uuid.New(),
			AcceptedAt: at, EndTime: at.Add(time.Hour), Kind: bidgate.KindStraight}
	}
	a := scratch(t, rs, row(1, 50), row(2, 60), row(3, 50))
	a.CurrentPrice = decimal.NewFromInt(103)
	tests := []struct {
		bidder, amount, wantAlias int64
	}{
		{70, 110, 3}, // new: after 50 and 60
		{60, 120, 2}, // known
		{80, 130, 4},
		{70, 140, 3},
	}
	for _, tc := range tests {
		r := bidgate.BidRequest{AuctionID: a.ID, BidderID: tc.bidder, Amount: decimal.NewFromInt(tc.amount), RequestID: uuid.New()}
		if _, out, err := rs.DecideBids(ctx, a.ID, []bidgate.BidRequest{r}); err != nil || out[0].Err != nil {
			t.Fatalf("bid of %d: %v %+v", tc.bidder, err, out)
		}
		st, err := rs.State(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.LeaderID != tc.bidder || st.LeaderAlias != tc.wantAlias {
			t.Fatalf("after %d's bid: leader %d alias %d, want alias %d", tc.bidder, st.LeaderID, st.LeaderAlias, tc.wantAlias)
		}
	}
}

// A batch that takes its bidders' tokens in its own script call (a single
// Redis server) refuses a bid over its bidder's rate and does nothing else
// for it; the buckets are the ones TakeTokens takes from.
func TestDecideLimitedBids(t *testing.T) {
	rdb := testredis.Client(t)
	rs := redisstore.New(rdb)
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		// make test-cluster: the buckets live in their lanes' slots, so
		// the batcher takes them in a call of its own.
		if rs.Together() {
			t.Fatal("on a Redis Cluster the batch's script cannot take the tokens")
		}
		return
	}
	if !rs.Together() {
		t.Fatal("a single Redis server should take tokens in the batch's script")
	}
	a := scratch(t, rs)
	x, y, z := time.Now().UnixNano()%1e12+1e12, time.Now().UnixNano()%1e12+2e12, time.Now().UnixNano()%1e12+3e12
	bid := func(bidder int64, amount string) bidgate.BidRequest {
		return bidgate.BidRequest{AuctionID: a.ID, BidderID: bidder, Amount: decimal.RequireFromString(amount), RequestID: uuid.New()}
	}
	reqs := []bidgate.BidRequest{bid(x, "101"), bid(y, "102"), bid(x, "103"), bid(y, "104"), bid(x, "105"), bid(z, "106")}
	// z takes no token (one taken already, say).
	limit := redisstore.Limit{Rate: 0.5, Burst: 2, Take: []bool{true, true, true, true, true, false}}
	sum, out, err := rs.DecideLimitedBids(ctx, a.ID, reqs, limit)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range out {
		var limited *bidgate.RateLimitedError
		switch {
		case i == 4: // x's third: over the burst
			if !errors.As(d.Err, &limited) || limited.RetryAfter < time.Second || limited.RetryAfter > 2*time.Second {
				t.Fatalf("bid %d: %+v, want rate limited for about 2s", i, d)
			}
		case d.Err != nil || !d.Result.Leading:
			t.Fatalf("bid %d: %+v, want accepted", i, d)
		}
	}
	if sum.Seq != 5 || sum.PriceCents != 10600 {
		t.Fatalf("summary %+v, want 5 rows at 106.00 (the limited bid did nothing)", sum)
	}
	waits, err := rs.TakeTokens(ctx, 0.5, 2, []int64{x, y, z})
	if err != nil {
		t.Fatal(err)
	}
	if waits[0] == 0 || waits[1] == 0 || waits[2] != 0 {
		t.Fatalf("TakeTokens after the batch: waits %v, want x's and y's buckets empty, z's full", waits)
	}
}

// LogEntries finds each query's entry whatever its hint names: an
// auction's hints are read as one range, and a hint the range misses (a
// message naming an earlier entry widens it past its count) is read again
// on its own. The log is longer than LogEntries scans from its start, so
// only the hints find the entries near its end.
func TestLogEntriesFindsEveryHintedEntry(t *testing.T) {
	rdb := testredis.Client(t)
	rs := redisstore.New(rdb)
	a := scratch(t, rs)
	const n = 40 * 256
	for b := range n / 256 {
		reqs := make([]bidgate.BidRequest, 256)
		for i := range reqs {
			reqs[i] = bidgate.BidRequest{AuctionID: a.ID, BidderID: int64(1000 + i%2), RequestID: uuid.New(),
				Amount: decimal.NewFromInt(int64(101 + b*256 + i))}
		}
		if _, _, err := rs.DecideLimitedBids(ctx, a.ID, reqs, redisstore.Limit{}); err != nil {
			t.Fatal(err)
		}
	}
	log, err := rs.ReadLog(ctx, a.ID, 0)
	if err != nil || len(log) != n {
		t.Fatalf("log: %d entries, %v", len(log), err)
	}
	query := func(seq int64, hint string) redisstore.LogQuery {
		return redisstore.LogQuery{AuctionID: a.ID, Seq: seq, Hint: hint}
	}
	own := func(seq int64) redisstore.LogQuery { return query(seq, log[seq-1].StreamID) }
	for _, c := range []struct {
		name string
		qs   []redisstore.LogQuery
	}{
		{"consecutive", []redisstore.LogQuery{own(n - 7), own(n - 6), own(n - 5), own(n - 4)}},
		{"with gaps and a repeat", []redisstore.LogQuery{own(n - 10), own(n - 5), own(n - 5), own(n)}},
		{"one naming an earlier entry", []redisstore.LogQuery{own(n - 3), query(n-3, log[n-300].StreamID), own(n - 2), own(n - 1), own(n)}},
		{"one naming a later entry", []redisstore.LogQuery{own(n - 9), own(n - 8), query(n-9, log[n-1].StreamID)}},
		{"near the start, without hints", []redisstore.LogQuery{query(1, ""), query(2, "x-1"), own(3)}},
		{"one query", []redisstore.LogQuery{own(n)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := rs.LogEntries(ctx, c.qs)
			if err != nil {
				t.Fatal(err)
			}
			for i, q := range c.qs {
				if q.Hint == log[q.Seq-1].StreamID || q.Seq < 10 {
					if got[i].Check != redisstore.LogFound || got[i].Entry != log[q.Seq-1] {
						t.Errorf("query %d (seq %d, hint %q): %+v, want the log's entry", i, q.Seq, q.Hint, got[i])
					}
				} else if got[i].Check != redisstore.LogNoBid {
					// Far from the start, the entry a wrong hint names is
					// all there is to look at.
					t.Errorf("query %d (seq %d, another entry's hint): %+v, want no bid", i, q.Seq, got[i])
				}
			}
		})
	}
	got, err := rs.LogEntries(ctx, []redisstore.LogQuery{own(n), query(n+1, log[n-1].StreamID)})
	if err != nil || got[0].Check != redisstore.LogFound || got[1].Check != redisstore.LogNoBid {
		t.Fatalf("the last seq and the next, unaccepted: %+v, %v; want found and no bid", got, err)
	}
}

// BenchmarkLogEntries checks a persister's batch of 100 consecutive bids
// of one auction against its log.
func BenchmarkLogEntries(b *testing.B) {
	rs := redisstore.New(testredis.Client(b))
	a := scratch(b, rs)
	reqs := make([]bidgate.BidRequest, 200)
	for i := range reqs {
		reqs[i] = bidgate.BidRequest{AuctionID: a.ID, BidderID: int64(1000 + i%2), RequestID: uuid.New(), Amount: decimal.NewFromInt(int64(101 + i))}
	}
	if _, _, err := rs.DecideLimitedBids(ctx, a.ID, reqs, redisstore.Limit{}); err != nil {
		b.Fatal(err)
	}
	log, err := rs.ReadLog(ctx, a.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	qs := make([]redisstore.LogQuery, 100)
	for i := range qs {
		e := log[100+i]
		qs[i] = redisstore.LogQuery{AuctionID: a.ID, Seq: e.Seq, Hint: e.StreamID}
	}
	for b.Loop() {
		got, err := rs.LogEntries(ctx, qs)
		if err != nil || got[99].Check != redisstore.LogFound {
			b.Fatalf("%+v, %v", got[99], err)
		}
	}
}

// DecideBatches decides each auction's batch as DecideLimitedBids does (in
// one round trip on a single server): an auction Redis lacks fails its own
// batch with ErrNoState and no other, and the same requests again are
// replays.
func TestDecideBatches(t *testing.T) {
	rs := redisstore.New(testredis.Client(t))
	a, b := scratch(t, rs), scratch(t, rs)
	missing := int64(1<<52 + 2e12) // past scratch's ids
	bid := func(auction, bidder int64, amount string) bidgate.BidRequest {
		return bidgate.BidRequest{AuctionID: auction, BidderID: bidder, Amount: decimal.RequireFromString(amount), RequestID: uuid.New()}
	}
	batches := []redisstore.Batch{
		{AuctionID: a.ID, Reqs: []bidgate.BidRequest{bid(a.ID, 2, "101"), bid(a.ID, 3, "105")}},
		{AuctionID: missing, Reqs: []bidgate.BidRequest{bid(missing, 2, "500")}},
		{AuctionID: b.ID, Reqs: []bidgate.BidRequest{bid(b.ID, 4, "50"), bid(b.ID, 5, "110")}},
	}
	for _, replayed := range []bool{false, true} {
		got := rs.DecideBatches(ctx, batches)
		if len(got) != 3 {
			t.Fatalf("%d results for 3 batches", len(got))
		}
		accepted := func(d redisstore.Decision, seq int64) bool {
			return d.Err == nil && d.Result.Replayed == replayed && d.Result.Bid.Seq == seq
		}
		if x := got[0]; x.Err != nil || !accepted(x.Decisions[0], 1) || !accepted(x.Decisions[1], 2) || x.Summary.PriceCents != 10500 {
			t.Fatalf("replayed %v: auction a: %+v", replayed, x)
		}
		if !errors.Is(got[1].Err, redisstore.ErrNoState) {
			t.Fatalf("replayed %v: the auction Redis lacks: %+v", replayed, got[1])
		}
		if x := got[2]; x.Err != nil || !errors.Is(x.Decisions[0].Err, bidgate.ErrBidTooLow) || !accepted(x.Decisions[1], 1) || x.Summary.Seq != 1 {
			t.Fatalf("replayed %v: auction b: %+v", replayed, x)
		}
	}
}

// A server without the script (restarted, or its scripts flushed) is sent
// its source for the calls that found it missing, and each bid is decided
// once.
func TestDecideBatchesLoadsTheScript(t *testing.T) {
	rdb, _ := testredis.Server(t)
	rs := redisstore.New(rdb)
	a, b := scratch(t, rs), scratch(t, rs)
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, replayed := range []bool{false, true} {
		got := rs.DecideBatches(ctx, []redisstore.Batch{
			{AuctionID: a.ID, Reqs: []bidgate.BidRequest{{AuctionID: a.ID, BidderID: 2, Amount: decimal.NewFromInt(101), RequestID: uuid.NameSpaceDNS}}},
			{AuctionID: b.ID, Reqs: []bidgate.BidRequest{{AuctionID: b.ID, BidderID: 3, Amount: decimal.NewFromInt(102), RequestID: uuid.NameSpaceURL}}},
		})
		for i, x := range got {
			if x.Err != nil || x.Decisions[0].Err != nil || x.Decisions[0].Result.Replayed != replayed || x.Decisions[0].Result.Bid.Seq != 1 {
				t.Fatalf("replayed %v: batch %d: %+v", replayed, i, x)
			}
		}
	}
}
