package shard

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testmetrics"
	"bidgate/persist/redisstore"
)

func newHotAuction(t testing.TB, s *Service, start, inc string, d, window, by time.Duration) bidgate.Auction {
	t.Helper()
	a, err := s.CreateAuction(ctx, bidgate.NewAuction{
		SellerID: 9_000_007, Title: "hot lot", StartPrice: decimal.RequireFromString(start),
		MinIncrement: decimal.RequireFromString(inc), EndTime: time.Now().Add(d),
		ExtendWindow: window, ExtendBy: by, Hot: true,
	})
	if err != nil {
		t.Fatalf("create hot auction: %v", err)
	}
	return a
}

// logEntry is one accepted bid in an auction's Redis log stream.
type logEntry struct {
	seq, bidder, cents, atUs, endUs int64
	req                             string
}

func readLog(t *testing.T, rdb redis.UniversalClient, auction int64) []logEntry {
	t.Helper()
	msgs, err := rdb.XRange(ctx, redisstore.KeysOf(auction).Log, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]logEntry, len(msgs))
	for i, m := range msgs {
		n := func(k string) int64 {
			v, err := strconv.ParseInt(m.Values[k].(string), 10, 64)
			if err != nil {
				t.Fatalf("log entry %v: field %s: %v", m, k, err)
			}
			return v
		}
		out[i] = logEntry{seq: n("seq"), bidder: n("bidder"), cents: n("amount"), atUs: n("at_us"), endUs: n("end_us"), req: m.Values["req"].(string)}
	}
	return out
}

// checkLog asserts the invariants on a hot auction's log: consecutive seqs,
// amounts rising by at least the increment, every bid before the end in
// force when it was accepted, one entry per request id.
func checkLog(t *testing.T, log []logEntry, a bidgate.Auction) {
	t.Helper()
	inc := bidgate.Cents(a.MinIncrement)
	price, end := bidgate.Cents(a.CurrentPrice), a.EndTime.UnixMicro()
	seen := map[string]bool{}
	for i, e := range log {
		if e.seq != a.BidCount+int64(i)+1 {
			t.Fatalf("entry %d has seq %d", i, e.seq)
		}
		if e.cents < price+inc {
			t.Fatalf("seq %d: %d cents does not beat %d by %d", e.seq, e.cents, price, inc)
		}
		if e.atUs >= end {
			t.Fatalf("seq %d accepted at %d, at or after the end %d", e.seq, e.atUs, end)
		}
		if e.endUs < end {
			t.Fatalf("seq %d shortened the auction from %d to %d", e.seq, end, e.endUs)
		}
		if seen[e.req] {
			t.Fatalf("request %s accepted twice", e.req)
		}
		seen[e.req] = true
		price, end = e.cents, e.endUs
	}
}

func TestHotConcurrentBidsNeverLoseTheHighest(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{})
	for run := 0; run < 20; run++ {
		a := newHotAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
		storm(t, s.PlaceBid, a.ID)
		got, err := s.Auction(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		log := readLog(t, s.rdb, a.ID)
		if !got.CurrentPrice.Equal(decimal.NewFromInt(3000)) || got.LeaderID != 200 {
			t.Fatalf("run %d: price %s leader %d, want 3000 and 200", run, got.CurrentPrice, got.LeaderID)
		}
		if last := log[len(log)-1]; last.cents != 300000 || got.BidCount != int64(len(log)) {
			t.Fatalf("run %d: log ends at %d cents after %d entries, auction has %d bids", run, last.cents, len(log), got.BidCount)
		}
		checkLog(t, log, a)
	}
}

// Storms on several hot auctions at once share their lane's script calls
// on a single Redis server: none loses its highest bid or mixes up another's.
func TestHotAuctionsStormTogether(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{})
	for run := range 5 {
		auctions := make([]bidgate.Auction, 4)
		for i := range auctions {
			auctions[i] = newHotAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
		}
		var wg sync.WaitGroup
		for _, a := range auctions {
			wg.Go(func() { storm(t, s.PlaceBid, a.ID) })
		}
		wg.Wait()
		for _, a := range auctions {
			got, err := s.Auction(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			log := readLog(t, s.rdb, a.ID)
			if !got.CurrentPrice.Equal(decimal.NewFromInt(3000)) || got.LeaderID != 200 || got.BidCount != int64(len(log)) {
				t.Fatalf("run %d, auction %d: price %s leader %d after %d bids (log %d), want 3000 and 200", run, a.ID,
					got.CurrentPrice, got.LeaderID, got.BidCount, len(log))
			}
			checkLog(t, log, a)
		}
	}
}

func TestHotScriptBranches(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{})
	one := func(a bidgate.Auction, r bidgate.BidRequest) hotOutcome {
		t.Helper()
		out, err := runBatch(s, a.ID, []bidgate.BidRequest{r})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}

	a := newHotAuction(t, s, "100", "1", time.Hour, 10*time.Second, 30*time.Second)
	first := bid(a.ID, 1, "101.50")
	accepted := one(a, first)
	if accepted.err != nil || accepted.res.Replayed || accepted.res.Bid.Seq != 1 || !accepted.res.Bid.EndTime.Equal(a.EndTime) {
		t.Fatalf("accepted: %+v", accepted)
	}
	t.Run("replay", func(t *testing.T) {
		o := one(a, first)
		if o.err != nil || !o.res.Replayed || !sameBid(o.res.Bid, accepted.res.Bid) {
			t.Fatalf("replay: %+v, want %+v", o, accepted)
		}
	})
	t.Run("reused key", func(t *testing.T) {
		other := first
		other.Amount = decimal.NewFromInt(500)
		if o := one(a, other); !errors.Is(o.err, bidgate.ErrIdempotencyKeyReused) {
			t.Fatalf("reused key: %+v", o)
		}
		other = first
		other.BidderID = 2
		if o := one(a, other); !errors.Is(o.err, bidgate.ErrIdempotencyKeyReused) {
			t.Fatalf("reused key, other bidder: %+v", o)
		}
	})
	t.Run("too low", func(t *testing.T) {
		var tooLow *bidgate.BidTooLowError
		if o := one(a, bid(a.ID, 2, "102.49")); !errors.As(o.err, &tooLow) || tooLow.MinimumBid.String() != "102.5" {
			t.Fatalf("too low: %+v", o)
		}
	})
	t.Run("extended", func(t *testing.T) {
		b := newHotAuction(t, s, "100", "1", 5*time.Second, 10*time.Second, 30*time.Second)
		o := one(b, bid(b.ID, 1, "101"))
		if o.err != nil || o.res.Bid.EndTime.Sub(o.res.Bid.AcceptedAt) != 30*time.Second {
			t.Fatalf("extended: %+v", o)
		}
	})
	t.Run("closed by time", func(t *testing.T) {
		b := newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
		// Move the end into Redis's past rather than waiting for it.
		if err := s.rdb.HSet(ctx, redisstore.KeysOf(b.ID).State, "end_us", time.Now().Add(-time.Second).UnixMicro()).Err(); err != nil {
			t.Fatal(err)
		}
		if o := one(b, bid(b.ID, 1, "500")); !errors.Is(o.err, bidgate.ErrAuctionClosed) {
			t.Fatalf("closed: %+v", o)
		}
	})
	t.Run("closed by status", func(t *testing.T) {
		b := newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
		if err := s.rdb.HSet(ctx, redisstore.KeysOf(b.ID).State, "status", "CLOSED").Err(); err != nil {
			t.Fatal(err)
		}
		if o := one(b, bid(b.ID, 1, "500")); !errors.Is(o.err, bidgate.ErrAuctionClosed) {
			t.Fatalf("closed: %+v", o)
		}
	})
	t.Run("one batch: order, in-batch replay and reuse", func(t *testing.T) {
		b := newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
		x := bid(b.ID, 1, "110")
		reuse := x
		reuse.Amount = decimal.NewFromInt(120)
		out, err := runBatch(s, b.ID, []bidgate.BidRequest{x, bid(b.ID, 2, "105"), x, reuse, bid(b.ID, 3, "111")})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].err != nil || out[0].res.Replayed || !errors.Is(out[1].err, bidgate.ErrBidTooLow) ||
			!out[2].res.Replayed || out[2].res.Bid.Seq != 1 || !errors.Is(out[3].err, bidgate.ErrIdempotencyKeyReused) ||
			out[4].err != nil || out[4].res.Bid.Seq != 2 {
			t.Fatalf("batch outcomes: %+v", out)
		}
	})
	t.Run("one call for several auctions, one of them lost", func(t *testing.T) {
		b := newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
		c := newHotAuction(t, s, "200", "5", time.Hour, 0, time.Second)
		d := newHotAuction(t, s, "300", "1", time.Hour, 0, time.Second)
		if err := s.rdb.Del(ctx, redisstore.KeysOf(c.ID).State, redisstore.KeysOf(c.ID).Reqs).Err(); err != nil {
			t.Fatal(err)
		}
		out, err := runBatch(s, 0, []bidgate.BidRequest{bid(b.ID, 1, "110"), bid(c.ID, 1, "203"), bid(d.ID, 1, "301"),
			bid(b.ID, 2, "111"), bid(c.ID, 2, "205"), bid(d.ID, 2, "300")})
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			seq   int64
			price string
			err   error
		}{{1, "110", nil}, {0, "", bidgate.ErrBidTooLow}, {1, "301", nil}, {2, "111", nil}, {1, "205", nil}, {0, "", bidgate.ErrBidTooLow}}
		for i, w := range want {
			o := out[i]
			if w.err != nil {
				if !errors.Is(o.err, w.err) {
					t.Fatalf("bid %d: %+v, want %v", i, o, w.err)
				}
				continue
			}
			if o.err != nil || o.res.Bid.Seq != w.seq || !o.res.CurrentPrice.Equal(decimal.RequireFromString(w.price)) {
				t.Fatalf("bid %d: %+v, want seq %d at %s", i, o, w.seq, w.price)
			}
		}
	})
	t.Run("missing state is loaded from PostgreSQL", func(t *testing.T) {
		b := newHotAuction(t, s, "100", "1", time.Hour, 0, time.Second)
		if err := s.rdb.Del(ctx, redisstore.KeysOf(b.ID).State, redisstore.KeysOf(b.ID).Reqs).Err(); err != nil {
			t.Fatal(err)
		}
		if o := one(b, bid(b.ID, 1, "101")); o.err != nil || o.res.Bid.Seq != 1 {
			t.Fatalf("after losing the state: %+v", o)
		}
	})
}

// TestHotRandomized bids random amounts from many bidders across the end of
// a short auction, retrying some requests with their key, and checks every
// invariant against the log and the answers.
func TestHotRandomized(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{})
	a := newHotAuction(t, s, "1000", "5", 1500*time.Millisecond, 0, time.Second)

	type answer struct {
		req bidgate.BidRequest
		res bidgate.BidResult
		err error
	}
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
		price   atomic.Int64
	)
	price.Store(100000)
	deadline := a.EndTime.Add(300 * time.Millisecond)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for time.Now().Before(deadline) {
				// Mostly near the price, sometimes below it.
				cents := price.Load() + int64(rng.IntN(3000)) - 500
				r := bidgate.BidRequest{AuctionID: a.ID, BidderID: int64(g + 1),
					Amount: bidgate.FromCents(max(cents, 1)), RequestID: uuid.New()}
				tries := 1
				if rng.IntN(10) == 0 {
					tries = 2 // a client retry with the same key
				}
				for range tries {
					res, err := s.PlaceBid(ctx, r)
					if err == nil && !res.Replayed {
						price.Store(max(price.Load(), bidgate.Cents(r.Amount)))
					}
					mu.Lock()
					answers = append(answers, answer{r, res, err})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()

	log := readLog(t, s.rdb, a.ID)
	checkLog(t, log, a)
	byReq := map[string]logEntry{}
	for _, e := range log {
		byReq[e.req] = e
	}
	closed, replays := 0, 0
	for _, an := range answers {
		e, inLog := byReq[an.req.RequestID.String()]
		switch {
		case an.err == nil:
			if !inLog || e.seq != an.res.Bid.Seq || e.cents != bidgate.Cents(an.req.Amount) || e.bidder != an.req.BidderID {
				t.Fatalf("answer %+v not matched by the log (%+v)", an.res.Bid, e)
			}
			if an.res.Replayed {
				replays++
			}
		case errors.Is(an.err, bidgate.ErrAuctionClosed):
			closed++
			if inLog && an.err != nil {
				t.Fatalf("request %s refused as closed but in the log", an.req.RequestID)
			}
		case errors.Is(an.err, bidgate.ErrBidTooLow):
			if inLog {
				t.Fatalf("request %s refused as too low but in the log", an.req.RequestID)
			}
		case errors.Is(an.err, bidgate.ErrAlreadyLeading):
			// Not final, unlike too low: once outbid, the bidder's retry
			// with the same key may be accepted.
		default:
			t.Fatalf("unexpected answer: %v", an.err)
		}
	}
	got, err := s.Auction(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := log[len(log)-1]
	if bidgate.Cents(got.CurrentPrice) != last.cents || got.LeaderID != last.bidder {
		t.Fatalf("auction says %s by %d, log ends with %d cents by %d", got.CurrentPrice, got.LeaderID, last.cents, last.bidder)
	}
	t.Logf("%d answers, %d accepted, %d replays, %d after the end", len(answers), len(log), replays, closed)
	if closed == 0 || replays == 0 {
		t.Fatalf("the test exercised no late bid (%d) or no replay (%d)", closed, replays)
	}
}

func TestHotIdempotencyUnderConcurrency(t *testing.T) {
	db, _ := testdb.New(t, 8)
	s := newService(t, db, Config{})
	a := newHotAuction(t, s, "1000", "10", time.Hour, 0, time.Second)
	keys := []bidgate.BidRequest{bid(a.ID, 1, "1100"), bid(a.ID, 2, "1200"), bid(a.ID, 3, "1300")}
	var wg sync.WaitGroup
	start := make(chan struct{})
	var fresh [3]atomic.Int64
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			k := i % 3
			res, err := s.PlaceBid(ctx, keys[k])
			switch {
			case err == nil && !res.Replayed:
				fresh[k].Add(1)
			case err == nil, errors.Is(err, bidgate.ErrBidTooLow), errors.Is(err, bidgate.ErrAlreadyLeading):
				// a replay, or a key that lost to a higher one before its first use
			default:
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	log := readLog(t, s.rdb, a.ID)
	for k := range keys {
		if fresh[k].Load() > 1 {
			t.Fatalf("key %d created %d bids", k, fresh[k].Load())
		}
	}
	checkLog(t, log, a)
	// Across batches, later: every accepted key replays.
	for _, e := range log {
		for _, k := range keys {
			if k.RequestID.String() == e.req {
				if res, err := s.PlaceBid(ctx, k); err != nil || !res.Replayed || res.Bid.Seq != e.seq {
					t.Fatalf("replay of %s: %+v %v", e.req, res, err)
				}
			}
		}
	}
}

func TestRateLimitPerBidder(t *testing.T) {
	db, _ := testdb.New(t, 4)
	s := newService(t, db, Config{RateLimit: 5, RateBurst: 10})
	a := newHotAuction(t, s, "1000", "1", time.Hour, 0, time.Second)
	greedy, other := rand.Int64N(1<<40)+1, rand.Int64N(1<<40)+1<<41
	amount := 2000
	limited := 0
	var retryAfter time.Duration
	start := time.Now()
	for range 15 {
		amount++
		r := bid(a.ID, greedy, strconv.Itoa(amount))
		r.Proxy = true // the leader raising their maximum: every bid is accepted
		_, err := s.PlaceBid(ctx, r)
		var rl *bidgate.RateLimitedError
		if errors.As(err, &rl) {
			limited++
			retryAfter = rl.RetryAfter
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// At most the burst passes, plus what the bucket refilled while the bids
	// ran (and one token of slack for Redis's clock against ours): a slow
	// run may pass more, a fast one passes 10 or 11.
	elapsed := time.Since(start)
	if most := 10 + 1 + int(5*elapsed.Seconds()); limited > 5 || 15-limited > most {
		t.Fatalf("%d of 15 bids in %v limited; want at most 5 limited and at most %d passed (burst 10, 5/s)", limited, elapsed, most)
	}
	if retryAfter <= 0 || retryAfter > 200*time.Millisecond {
		t.Fatalf("retry after %v, want up to one token's time (200ms)", retryAfter)
	}
	if _, err := s.PlaceBid(ctx, bid(a.ID, other, strconv.Itoa(amount+1))); err != nil {
		t.Fatalf("another bidder: %v", err)
	}
}

func TestPromotionUnderLoad(t *testing.T) {
	db, _ := testdb.New(t, 16)
	s := newService(t, db, Config{})
	a := newAuction(t, s, "1000", "1", time.Hour, 0, time.Second)

	type answer struct {
		req bidgate.BidRequest
		res bidgate.BidResult
	}
	var (
		next    atomic.Int64
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	promoteAt := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 150 {
				n := next.Add(1)
				if n == 300 {
					close(promoteAt)
				}
				r := bid(a.ID, int64(g+1), strconv.FormatInt(1000+n, 10))
				res, err := s.PlaceBid(ctx, r)
				if err != nil && !errors.Is(err, bidgate.ErrBidTooLow) && !errors.Is(err, bidgate.ErrAlreadyLeading) {
					t.Errorf("bid: %v", err)
					return
				}
				if err == nil {
					mu.Lock()
					answers = append(answers, answer{r, res})
					mu.Unlock()
				}
			}
		}()
	}
	<-promoteAt
	if _, err := s.Promote(ctx, a.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// The history is the cold bids in PostgreSQL followed by the hot ones in
	// Redis; together they must hold every accepted bid, once, rising.
	cold, err := s.store.AcceptedBids(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	hotLog := readLog(t, s.rdb, a.ID)
	if len(cold) == 0 || len(hotLog) == 0 {
		t.Fatalf("%d cold and %d hot bids: the promotion did not happen under load", len(cold), len(hotLog))
	}
	seqOf := map[string]int64{}
	prev := int64(0)
	for _, b := range cold {
		seqOf[b.RequestID.String()] = b.Seq
		if bidgate.Cents(b.Amount) <= prev {
			t.Fatalf("cold history not rising at seq %d", b.Seq)
		}
		prev = bidgate.Cents(b.Amount)
	}
	for _, e := range hotLog {
		if _, dup := seqOf[e.req]; dup {
			t.Fatalf("request %s accepted on both paths", e.req)
		}
		seqOf[e.req] = e.seq
		if e.cents <= prev || e.seq != int64(len(seqOf)) {
			t.Fatalf("history breaks at hot seq %d", e.seq)
		}
		prev = e.cents
	}
	for _, an := range answers {
		if seq, ok := seqOf[an.req.RequestID.String()]; !ok || seq != an.res.Bid.Seq {
			t.Fatalf("accepted bid %s (seq %d) missing from the history", an.req.RequestID, an.res.Bid.Seq)
		}
		// A retry after the promotion still finds the original.
		if res, err := s.PlaceBid(ctx, an.req); err != nil || !res.Replayed || res.Bid.Seq != an.res.Bid.Seq {
			t.Fatalf("replay of %s after promotion: %+v %v", an.req.RequestID, res, err)
		}
	}
	got, err := s.Auction(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bidgate.Cents(got.CurrentPrice) != prev || got.Mode != bidgate.ModeHot {
		t.Fatalf("auction at %s (%s), history ends at %d cents", got.CurrentPrice, got.Mode, prev)
	}
}

func TestAutomaticPromotion(t *testing.T) {
	db, _ := testdb.New(t, 8)
	logs := await.NewLog()
	s := newService(t, db, Config{PromoteRate: 5, Log: slog.New(logs)})
	a := newAuction(t, s, "1000", "1", time.Hour, 0, time.Second)
	var accepted []bidgate.BidRequest
	for i := range 50 {
		r := bid(a.ID, int64(i+1), strconv.Itoa(1001+i))
		if _, err := s.PlaceBid(ctx, r); err != nil {
			t.Fatalf("bid %d: %v", i, err)
		}
		accepted = append(accepted, r)
	}
	// Promotion runs in the background and logs once the mode flip is
	// committed, or that it failed.
	timeout := time.After(10 * time.Second)
	for promoted := false; !promoted; {
		select {
		case r := <-logs:
			switch {
			case r.Message == "auction promoted to hot":
				promoted = true
			case r.Level >= slog.LevelWarn:
				t.Fatalf("while awaiting the promotion: %s", formatRecord(r))
			}
		case <-timeout:
			t.Fatal("50 quick bids did not promote the auction within 10s")
		}
	}
	if got, err := s.store.Auction(ctx, a.ID); err != nil || got.Mode != bidgate.ModeHot {
		t.Fatalf("after the promotion the row says %+v (%v)", got, err)
	}
	for _, r := range accepted {
		if res, err := s.PlaceBid(ctx, r); err != nil || !res.Replayed {
			t.Fatalf("replay after automatic promotion: %+v %v", res, err)
		}
	}
	got, err := s.Auction(ctx, a.ID)
	if err != nil || !got.CurrentPrice.Equal(decimal.NewFromInt(1050)) || got.BidCount != 50 {
		t.Fatalf("after promotion: %+v %v", got, err)
	}
}

// runBatch decides reqs as one batch of the auction's batcher.
func runBatch(s *Service, auctionID int64, reqs []bidgate.BidRequest) ([]hotOutcome, error) {
	hr := make([]hotRequest, len(reqs))
	for i, r := range reqs {
		hr[i] = hotRequest{BidRequest: r}
	}
	return s.hot.runBatch(ctx, auctionID, hr)
}

func formatRecord(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	return b.String()
}

// --hot-gather reaches the hot batcher: bids that arrive within it of a
// busy auction's last script call share the next one.
func TestHotGatherSharesAScriptCall(t *testing.T) {
	db, _ := testdb.New(t, 4)
	reg := prometheus.NewRegistry()
	s := newServiceOn(t, db, Config{HotGather: 300 * time.Millisecond}, reg)
	a := newHotAuction(t, s, "1000", "1", time.Hour, 0, time.Second)
	if _, err := s.PlaceBid(ctx, bid(a.ID, 100, "1001")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.PlaceBid(ctx, bid(a.ID, int64(101+i), strconv.Itoa(1100+i)))
			if err != nil && !errors.Is(err, bidgate.ErrBidTooLow) {
				t.Errorf("bid %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if sum, count := testmetrics.Histogram(t, reg, "bidgate_hot_batch_size"); sum != 6 || count != 2 {
		t.Fatalf("%v bids in %v script calls, want 6 in 2", sum, count)
	}
}

// On a single Redis server the bids of several hot auctions that arrive
// within --hot-gather of the last call share one round trip; on a Cluster
// each auction calls on its own.
func TestHotAuctionsShareARoundTrip(t *testing.T) {
	db, _ := testdb.New(t, 4)
	reg := prometheus.NewRegistry()
	s := newServiceOn(t, db, Config{HotGather: 300 * time.Millisecond}, reg)
	auctions := make([]bidgate.Auction, 4)
	for i := range auctions {
		auctions[i] = newHotAuction(t, s, "1000", "1", time.Hour, 0, time.Second)
	}
	if _, err := s.PlaceBid(ctx, bid(auctions[0].ID, 100, "1001")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, a := range auctions {
		wg.Go(func() {
			if _, err := s.PlaceBid(ctx, bid(a.ID, int64(101+i), "1100")); err != nil {
				t.Errorf("bid on auction %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	calls := 2.0
	if !s.rs.Together() {
		calls = 5 // auctions[0]'s two, and one for each other auction
	}
	if sum, count := testmetrics.Histogram(t, reg, "bidgate_hot_batch_size"); sum != 5 || count != calls {
		t.Fatalf("%v bids in %v round trips, want 5 in %v", sum, count, calls)
	}
}
