package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
)

var (
	//go:embed lua/bid_batch.lua
	bidBatchLua    string
	bidBatchScript = redis.NewScript(bucketLua + bidBatchLua)
)

// ErrNoState says Redis has no state for the auction: the caller loads it
// from PostgreSQL (Load) and tries again.
var ErrNoState = errors.New("auction state not in Redis")

// Summary is a hot auction's state after a batch.
type Summary struct {
	PriceCents, IncCents int64
	EndUs, Seq           int64
	LeaderID             int64 // 0: nobody
	SellerID             int64 // 0 in a state loaded before sellers were kept
	Status               bidgate.Status
}

// Decision is one bid's outcome: a result (new or replayed) or its refusal
// (bidgate.ErrAuctionClosed, a *bidgate.BidTooLowError,
// bidgate.ErrIdempotencyKeyReused, bidgate.ErrSelfBidding,
// bidgate.ErrAlreadyLeading, bidgate.ErrMaxNotRaised).
type Decision struct {
	Result bidgate.BidResult
	Err    error
}

// DecideBids decides a batch of bids on one hot auction in one script call,
// atomically and in order, by Redis's clock; a batch that accepted bids
// also publishes the new state on the auction's channel. It fails with
// ErrNoState when Redis lacks the auction.
func (s *Store) DecideBids(ctx context.Context, auctionID int64, reqs []bidgate.BidRequest) (Summary, []Decision, error) {
	return s.DecideLimitedBids(ctx, auctionID, reqs, Limit{})
}

// Limit is the token buckets a batch takes from in its own script call:
// one token for each bid whose Take is true, refilled at Rate per second up
// to Burst. Only where Together says so.
type Limit struct {
	Rate  float64
	Burst int
	Take  []bool // by bid; nil: none
}

// Together says whether a batch can take its bidders' tokens in its own
// script call (DecideLimitedBids with a Limit): on a single Redis server,
// where a script may use keys of any slot. On a Cluster the buckets live in
// their lanes' slots, and TakeTokens is a round trip of its own.
func (s *Store) Together() bool {
	_, single := s.rdb.(*redis.Client)
	return single
}

// DecideLimitedBids is DecideBids taking, first, a token from the bucket of
// each bidder limit.Take names: a bid whose bidder is over their rate is
// refused (a *bidgate.RateLimitedError) and nothing else is done for it.
// One round trip for the tokens and the decisions.
func (s *Store) DecideLimitedBids(ctx context.Context, auctionID int64, reqs []bidgate.BidRequest, limit Limit) (Summary, []Decision, error) {
	keys, args := decisionCall(auctionID, reqs, limit)
	v, err := s.runDecision(ctx, bidBatchScript, keys, args...)
	if err != nil {
		return Summary{}, nil, unavailable(fmt.Errorf("hot bids on auction %d: %w", auctionID, err))
	}
	return parseDecided(auctionID, reqs, v)
}

// Batch is one hot auction's waiting bids, for DecideBatches.
type Batch struct {
	AuctionID int64
	Reqs      []bidgate.BidRequest
	Limit     Limit
}

// Decided is what DecideBatches made of one Batch: what DecideLimitedBids
// returns for it.
type Decided struct {
	Summary   Summary
	Decisions []Decision
	Err       error // ErrNoState: load the auction and try it again
}

// DecideBatches decides the batches of several hot auctions, each as
// DecideLimitedBids does, in one round trip on a single Redis server: one
// pipeline of script calls, then one WAIT when decisions wait for replicas.
// At a few hundred bids a second per auction a batch holds a few bids, and
// its round trip cost more than deciding them. On a Cluster, where the
// auctions' keys live on different nodes, it decides them one after
// another.
func (s *Store) DecideBatches(ctx context.Context, batches []Batch) []Decided {
	if len(batches) == 0 {
		return nil
	}
	out := make([]Decided, len(batches))
	client, single := s.rdb.(*redis.Client)
	if len(batches) == 1 || !single {
		for i, b := range batches {
			out[i].Summary, out[i].Decisions, out[i].Err = s.DecideLimitedBids(ctx, b.AuctionID, b.Reqs, b.Limit)
		}
		return out
	}
	calls := make([]scriptCall, len(batches))
	for i, b := range batches {
		calls[i].keys, calls[i].args = decisionCall(b.AuctionID, b.Reqs, b.Limit)
	}
	replies := s.runDecisions(ctx, client, bidBatchScript, calls)
	for i, b := range batches {
		if err := replies[i].err; err != nil {
			out[i].Err = unavailable(fmt.Errorf("hot bids on auction %d: %w", b.AuctionID, err))
			continue
		}
		out[i].Summary, out[i].Decisions, out[i].Err = parseDecided(b.AuctionID, b.Reqs, replies[i].v)
	}
	return out
}

// decisionCall is bid_batch.lua's keys and arguments for reqs on auctionID.
func decisionCall(auctionID int64, reqs []bidgate.BidRequest, limit Limit) ([]string, []any) {
	k := KeysOf(auctionID)
	keys := []string{k.State, k.Reqs, k.Log, k.Aliases}
	args := make([]any, 4, 4+5*len(reqs))
	args[0], args[1] = Channel(auctionID), strconv.FormatInt(auctionID, 10)
	args[2], args[3] = strconv.FormatFloat(limit.Rate, 'f', -1, 64), limit.Burst
	for i, r := range reqs {
		bucket := 0
		if limit.Take != nil && limit.Take[i] {
			keys = append(keys, bucketKey(r.BidderID))
			bucket = len(keys) - 4
		}
		args = append(args, r.RequestID.String(), strconv.FormatInt(r.BidderID, 10), bidgate.Cents(r.Amount), string(r.Kind()), bucket)
	}
	return keys, args
}

// parseDecided reads bid_batch.lua's reply v for reqs on auctionID.
func parseDecided(auctionID int64, reqs []bidgate.BidRequest, v []any) (Summary, []Decision, error) {
	if len(v) == 1 {
		if n, ok := v[0].(int64); ok && n == 0 {
			return Summary{}, nil, ErrNoState
		}
	}
	if len(v) != len(reqs)+1 {
		return Summary{}, nil, fmt.Errorf("hot bids on auction %d: script returned %d results for %d bids", auctionID, len(v)-1, len(reqs))
	}
	sum, err := parseSummary(v[0])
	if err != nil {
		return Summary{}, nil, fmt.Errorf("hot bids on auction %d: %w", auctionID, err)
	}
	out := make([]Decision, len(reqs))
	for i, r := range reqs {
		if out[i], err = parseDecision(v[i+1], r); err != nil {
			return Summary{}, nil, fmt.Errorf("hot bids on auction %d: %w", auctionID, err)
		}
	}
	return sum, out, nil
}

// parseSummary reads {price, inc, end_us, status, seq, leader, seller}.
func parseSummary(v any) (Summary, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 7 {
		return Summary{}, fmt.Errorf("bad summary %v", v)
	}
	var s Summary
	var err error
	for i, dst := range []*int64{&s.PriceCents, &s.IncCents, &s.EndUs, nil, &s.Seq} {
		if dst != nil {
			if *dst, err = intReply(a[i]); err != nil {
				return s, err
			}
		}
	}
	status, _ := a[3].(string)
	s.Status = bidgate.Status(status)
	if s.LeaderID, err = idReply(a[5]); err != nil {
		return s, fmt.Errorf("leader: %w", err)
	}
	if s.SellerID, err = idReply(a[6]); err != nil {
		return s, fmt.Errorf("seller: %w", err)
	}
	return s, nil
}

// Result codes of bid_batch.lua.
const (
	codeAccepted       = 1  // {1, seq, at_us, end_us, amount, leading, price}
	codeReplayed       = 2  // {2, seq, at_us, end_us, amount, leading, price}
	codeKeyReused      = 3  // {3}
	codeTooLow         = 4  // {4, price, inc}
	codeClosed         = 5  // {5}
	codeSelfBidding    = 6  // {6}
	codeAlreadyLeading = 7  // {7}
	codeMaxNotRaised   = 8  // {8}
	codeUnavailable    = 9  // {9}, buy_now.lua only
	codeRateLimited    = 10 // {10, wait_ms}
)

func parseDecision(v any, r bidgate.BidRequest) (Decision, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 || len(a) > 7 {
		return Decision{}, fmt.Errorf("bad result %v", v)
	}
	var nums [7]int64
	for i := range a {
		n, err := intReply(a[i])
		if err != nil {
			return Decision{}, err
		}
		nums[i] = n
	}
	switch {
	case (nums[0] == codeAccepted || nums[0] == codeReplayed) && len(a) == 7:
		bid := bidgate.Bid{AuctionID: r.AuctionID, BidderID: r.BidderID, Amount: bidgate.FromCents(nums[4]),
			Kind: r.Kind(), RequestID: r.RequestID,
			Seq: nums[1], AcceptedAt: time.UnixMicro(nums[2]).UTC(), EndTime: time.UnixMicro(nums[3]).UTC()}
		if r.Proxy {
			bid.MaxAmount = decimal.NewNullDecimal(r.Amount)
		}
		return Decision{Result: bidgate.BidResult{Bid: bid, Replayed: nums[0] == codeReplayed,
			Leading: nums[5] == 1, CurrentPrice: bidgate.FromCents(nums[6])}}, nil
	case nums[0] == codeKeyReused:
		return Decision{Err: bidgate.ErrIdempotencyKeyReused}, nil
	case nums[0] == codeTooLow && len(a) == 3:
		price, inc := bidgate.FromCents(nums[1]), bidgate.FromCents(nums[2])
		return Decision{Err: &bidgate.BidTooLowError{CurrentPrice: price, MinimumBid: price.Add(inc)}}, nil
	case nums[0] == codeClosed:
		return Decision{Err: bidgate.ErrAuctionClosed}, nil
	case nums[0] == codeSelfBidding:
		return Decision{Err: bidgate.ErrSelfBidding}, nil
	case nums[0] == codeAlreadyLeading:
		return Decision{Err: bidgate.ErrAlreadyLeading}, nil
	case nums[0] == codeMaxNotRaised:
		return Decision{Err: bidgate.ErrMaxNotRaised}, nil
	case nums[0] == codeUnavailable:
		return Decision{Err: bidgate.ErrBuyNowUnavailable}, nil
	case nums[0] == codeRateLimited && len(a) == 2:
		return Decision{Err: &bidgate.RateLimitedError{RetryAfter: time.Duration(nums[1]) * time.Millisecond}}, nil
	}
	return Decision{}, fmt.Errorf("bad result %v", v)
}

var (
	//go:embed lua/buy_now.lua
	buyNowLua    string
	buyNowScript = redis.NewScript(buyNowLua)
)

// BuyNow closes a hot auction at its buy-now price for the buyer r.BidderID,
// by Redis's clock and atomically with its bids, while no bid has been
// accepted: the decision's bid is the buy-now row, and its end the instant
// it closed. Its refusals: bidgate.ErrAuctionClosed, ErrSelfBidding,
// ErrIdempotencyKeyReused, ErrBuyNowUnavailable. It fails with ErrNoState
// when Redis lacks the auction.
func (s *Store) BuyNow(ctx context.Context, r bidgate.BidRequest) (Decision, error) {
	k := KeysOf(r.AuctionID)
	v, err := s.runDecision(ctx, buyNowScript, []string{k.State, k.Reqs, k.Log, k.Aliases},
		Channel(r.AuctionID), strconv.FormatInt(r.AuctionID, 10), r.RequestID.String(), strconv.FormatInt(r.BidderID, 10))
	if err != nil {
		return Decision{}, unavailable(fmt.Errorf("buy-now on auction %d: %w", r.AuctionID, err))
	}
	if n, ok := v[0].(int64); ok && n == 0 && len(v) == 1 {
		return Decision{}, ErrNoState
	}
	d, err := parseDecision(v, r)
	if err != nil {
		return Decision{}, fmt.Errorf("buy-now on auction %d: %w", r.AuctionID, err)
	}
	if d.Err == nil {
		d.Result.Bid.Kind = bidgate.KindBuyNow
	}
	return d, nil
}
