package shard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate"
	"bidgate/persist"
)

var (
	//go:embed lua/bid_batch.lua
	bidBatchLua string
	//go:embed lua/load_state.lua
	loadStateLua string

	bidBatchScript  = redis.NewScript(bidBatchLua)
	loadStateScript = redis.NewScript(loadStateLua)
)

// hotKeys are the keys bid_batch.lua and load_state.lua take: state,
// request ids, log.
func hotKeys(auctionID int64) []string {
	k := persist.KeysOf(auctionID)
	return []string{k.State, k.Reqs, k.Log}
}

// hot serializes bids of hot auctions in Redis, one script call per batch.
type hot struct {
	rdb     redis.UniversalClient
	db      persist.Querier
	batches *batchers[int64, bidgate.BidRequest, hotOutcome]
	cache   *priceCache
	metrics *metrics
	pub     *publisher

	onAccepted func(auctionID int64) // may be nil
}

type hotOutcome struct {
	res bidgate.BidResult
	err error // the bid's own answer: too low, closed, reused key
}

// hotSummary is the auction's state after a batch.
type hotSummary struct {
	price, inc, endUs, seq, leader int64
	seller                         int64 // 0 in a state loaded before sellers were kept
	status                         bidgate.Status
}

func (h *hot) placeBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	o, err := h.batches.do(ctx, r.AuctionID, r)
	if err != nil {
		return bidgate.BidResult{}, err
	}
	return o.res, o.err
}

// runBatch is the batcher's call: one script run for the waiting bids of one
// auction, loading the state from PostgreSQL first if Redis lacks it.
func (h *hot) runBatch(ctx context.Context, auctionID int64, reqs []bidgate.BidRequest) ([]hotOutcome, error) {
	args := make([]any, 0, 3*len(reqs))
	for _, r := range reqs {
		args = append(args, r.RequestID.String(), strconv.FormatInt(r.BidderID, 10), bidgate.Cents(r.Amount))
	}
	keys := hotKeys(auctionID)
	start := time.Now()
	v, err := bidBatchScript.Run(ctx, h.rdb, keys, args...).Slice()
	if err == nil && isMissingState(v) {
		if err = h.load(ctx, auctionID); err == nil {
			v, err = bidBatchScript.Run(ctx, h.rdb, keys, args...).Slice()
		}
	}
	h.metrics.scriptDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, unavailable(fmt.Errorf("hot bids on auction %d: %w", auctionID, err))
	}
	if isMissingState(v) || len(v) != len(reqs)+1 {
		return nil, fmt.Errorf("hot bids on auction %d: script returned %d results for %d bids", auctionID, len(v)-1, len(reqs))
	}
	sum, err := parseSummary(v[0])
	if err != nil {
		return nil, fmt.Errorf("hot bids on auction %d: %w", auctionID, err)
	}
	out := make([]hotOutcome, len(reqs))
	accepted, closed := false, sum.status == bidgate.StatusClosed
	var newest time.Time
	for i, r := range reqs {
		out[i], err = parseResult(v[i+1], r)
		if err != nil {
			return nil, fmt.Errorf("hot bids on auction %d: %w", auctionID, err)
		}
		if out[i].err == nil && !out[i].res.Replayed {
			accepted, newest = true, out[i].res.Bid.AcceptedAt
		}
		closed = closed || errors.Is(out[i].err, bidgate.ErrAuctionClosed)
	}
	h.cache.update(auctionID, sum.seller, bidgate.FromCents(sum.price), bidgate.FromCents(sum.inc), closed)
	if accepted {
		if h.onAccepted != nil {
			h.onAccepted(auctionID)
		}
		h.pub.publish(ctx, bidgate.Auction{ID: auctionID, CurrentPrice: bidgate.FromCents(sum.price),
			LeaderID: sum.leader, EndTime: time.UnixMicro(sum.endUs), Status: sum.status, BidCount: sum.seq}, newest)
	}
	return out, nil
}

func isMissingState(v []any) bool {
	if len(v) != 1 {
		return false
	}
	n, ok := v[0].(int64)
	return ok && n == 0
}

func parseSummary(v any) (hotSummary, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 7 {
		return hotSummary{}, fmt.Errorf("bad summary %v", v)
	}
	var s hotSummary
	var err error
	for i, dst := range []*int64{&s.price, &s.inc, &s.endUs} {
		if *dst, err = persist.IntReply(a[i]); err != nil {
			return s, err
		}
	}
	status, _ := a[3].(string)
	s.status = bidgate.Status(status)
	if s.seq, err = persist.IntReply(a[4]); err != nil {
		return s, err
	}
	if leader, _ := a[5].(string); leader != "" {
		if s.leader, err = strconv.ParseInt(leader, 10, 64); err != nil {
			return s, fmt.Errorf("bad leader %q", leader)
		}
	}
	if seller, _ := a[6].(string); seller != "" {
		if s.seller, err = strconv.ParseInt(seller, 10, 64); err != nil {
			return s, fmt.Errorf("bad seller %q", seller)
		}
	}
	return s, nil
}

func parseResult(v any, r bidgate.BidRequest) (hotOutcome, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return hotOutcome{}, fmt.Errorf("bad result %v", v)
	}
	nums := make([]int64, len(a))
	for i := range a {
		n, err := persist.IntReply(a[i])
		if err != nil {
			return hotOutcome{}, err
		}
		nums[i] = n
	}
	switch {
	case (nums[0] == 1 || nums[0] == 2) && len(nums) == 4:
		bid := bidgate.Bid{AuctionID: r.AuctionID, BidderID: r.BidderID, Amount: r.Amount, RequestID: r.RequestID,
			Seq: nums[1], AcceptedAt: time.UnixMicro(nums[2]).UTC(), EndTime: time.UnixMicro(nums[3]).UTC()}
		return hotOutcome{res: bidgate.BidResult{Bid: bid, Replayed: nums[0] == 2}}, nil
	case nums[0] == 3:
		return hotOutcome{err: bidgate.ErrIdempotencyKeyReused}, nil
	case nums[0] == 4 && len(nums) == 3:
		price, inc := bidgate.FromCents(nums[1]), bidgate.FromCents(nums[2])
		return hotOutcome{err: &bidgate.BidTooLowError{CurrentPrice: price, MinimumBid: price.Add(inc)}}, nil
	case nums[0] == 5:
		return hotOutcome{err: bidgate.ErrAuctionClosed}, nil
	case nums[0] == 6:
		return hotOutcome{err: bidgate.ErrSelfBidding}, nil
	}
	return hotOutcome{}, fmt.Errorf("bad result %v", v)
}

// load copies a hot auction from PostgreSQL into Redis unless Redis already
// has it: a crash between creating the row and writing Redis, or a lost Redis
// state, never strands an auction.
func (h *hot) load(ctx context.Context, auctionID int64) error {
	store := persist.Store{DB: h.db}
	a, err := store.Auction(ctx, auctionID)
	if err != nil {
		return err
	}
	if a.Mode != bidgate.ModeHot {
		return fmt.Errorf("load auction %d into Redis: %w", auctionID, errNotHot)
	}
	bids, err := store.AcceptedBids(ctx, auctionID)
	if err != nil {
		return err
	}
	// The row counts bids only up to the first gap (persisted_seq); new
	// bids must never reuse the seq of one that is there. Its end is moved
	// by the closer, not by persisted bids: an anti-sniping extension they
	// carry (at most extend_by past the bid) is taken from them.
	for _, b := range bids {
		a.BidCount = max(a.BidCount, b.Seq)
		if end := minTime(b.EndTime, b.AcceptedAt.Add(a.ExtendBy)); end.After(a.EndTime) {
			a.EndTime = end
		}
	}
	_, err = writeState(ctx, h.rdb, a, bids, false)
	return err
}

var errNotHot = errors.New("auction is not hot")

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// writeState runs load_state.lua: the auction's state and the request ids of
// the bids PostgreSQL holds, so that their replays are still recognized.
func writeState(ctx context.Context, rdb redis.UniversalClient, a bidgate.Auction, bids []bidgate.Bid, overwrite bool) (bool, error) {
	force := "0"
	if overwrite {
		force = "1"
	}
	leader := ""
	if a.LeaderID != 0 {
		leader = strconv.FormatInt(a.LeaderID, 10)
	}
	args := []any{force,
		"price", bidgate.Cents(a.CurrentPrice), "inc", bidgate.Cents(a.MinIncrement), "leader", leader,
		"end_us", a.EndTime.UnixMicro(), "status", string(a.Status),
		"window_us", a.ExtendWindow.Microseconds(), "by_us", a.ExtendBy.Microseconds(), "seq", a.BidCount,
		"seller", a.SellerID}
	for _, b := range bids {
		args = append(args, b.RequestID.String(), requestRecord(b))
	}
	n, err := loadStateScript.Run(ctx, rdb, hotKeys(a.ID), args...).Int()
	if err != nil {
		return false, unavailable(fmt.Errorf("write auction %d to Redis: %w", a.ID, err))
	}
	return n == 1, nil
}

// requestRecord is a bid as bid_batch.lua keeps it under its request id.
func requestRecord(b bidgate.Bid) string {
	return fmt.Sprintf("%d|%d|%d|%d|%d", b.Seq, b.AcceptedAt.UnixMicro(), b.EndTime.UnixMicro(), b.BidderID, bidgate.Cents(b.Amount))
}

// knowsRequest reports whether Redis holds a bid under the request id.
func (h *hot) knowsRequest(ctx context.Context, r bidgate.BidRequest) (bool, error) {
	ok, err := h.rdb.HExists(ctx, hotKeys(r.AuctionID)[1], r.RequestID.String()).Result()
	if err != nil {
		return false, unavailable(fmt.Errorf("look up request %s: %w", r.RequestID, err))
	}
	return ok, nil
}

// auction overlays the live Redis state on the PostgreSQL row.
func (h *hot) auction(ctx context.Context, a bidgate.Auction) (bidgate.Auction, error) {
	keys := hotKeys(a.ID)
	v, err := h.rdb.HMGet(ctx, keys[0], "price", "leader", "end_us", "status", "seq").Result()
	if err == nil && v[0] == nil {
		if err = h.load(ctx, a.ID); err == nil {
			v, err = h.rdb.HMGet(ctx, keys[0], "price", "leader", "end_us", "status", "seq").Result()
		}
	}
	if err != nil {
		return a, unavailable(fmt.Errorf("read auction %d from Redis: %w", a.ID, err))
	}
	fields := make([]int64, 5)
	for i, f := range v {
		s, _ := f.(string)
		if i == 3 {
			a.Status = bidgate.Status(s)
			continue
		}
		if s != "" {
			if fields[i], err = strconv.ParseInt(s, 10, 64); err != nil {
				return a, fmt.Errorf("auction %d: bad Redis field %v", a.ID, f)
			}
		}
	}
	a.CurrentPrice, a.LeaderID = bidgate.FromCents(fields[0]), fields[1]
	a.EndTime, a.BidCount = time.UnixMicro(fields[2]).UTC(), fields[4]
	return a, nil
}

// unavailable marks a Redis error as an outage (503 with Retry-After) when
// it is one: no connection, a timeout, or Redis saying it cannot serve now.
// Other replies (a script error, say) are bugs and stay as they are.
func unavailable(err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && !errors.Is(err, context.DeadlineExceeded) {
		switch strings.SplitN(rerr.Error(), " ", 2)[0] {
		case "LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS":
		default:
			return err
		}
	}
	return fmt.Errorf("%w: %w", bidgate.ErrUnavailable, err)
}
