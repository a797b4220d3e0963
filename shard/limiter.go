package shard

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate"
)

var (
	//go:embed lua/token_bucket.lua
	tokenBucketLua    string
	tokenBucketScript = redis.NewScript(tokenBucketLua)
)

// limiter is the per-bidder token bucket, shared by every node through Redis.
// Bidders are spread over lanes; the checks waiting in one lane go to Redis
// as one script call, and a lane's keys share a hash tag (one Cluster slot).
type limiter struct {
	rdb   redis.UniversalClient
	rate  float64 // tokens per second
	burst int
	batch *batchers[int, int64, time.Duration]
}

// lanes is how many script calls may be in flight at once.
const lanes = 8

func newLimiter(rdb redis.UniversalClient, rate float64, burst int) *limiter {
	l := &limiter{rdb: rdb, rate: rate, burst: burst}
	l.batch = newBatchers(256, 16384, 10*time.Second, l.check)
	return l
}

// allow takes a token for the bidder, or returns a *bidgate.RateLimitedError.
func (l *limiter) allow(ctx context.Context, bidder int64) error {
	if l.rate <= 0 {
		return nil
	}
	wait, err := l.batch.do(ctx, int(bidder%lanes), bidder)
	if err != nil {
		return err
	}
	if wait > 0 {
		return &bidgate.RateLimitedError{RetryAfter: wait}
	}
	return nil
}

// check runs the bucket script for the bidders of one lane and returns how
// long each must wait (0: allowed).
func (l *limiter) check(ctx context.Context, lane int, bidders []int64) ([]time.Duration, error) {
	keys := make([]string, len(bidders))
	for i, b := range bidders {
		keys[i] = bucketKey(lane, b)
	}
	v, err := tokenBucketScript.Run(ctx, l.rdb, keys, strconv.FormatFloat(l.rate, 'f', -1, 64), l.burst).Int64Slice()
	if err != nil {
		return nil, unavailable(fmt.Errorf("rate limit: %w", err))
	}
	if len(v) != len(bidders) {
		return nil, fmt.Errorf("rate limit: %d answers for %d bidders", len(v), len(bidders))
	}
	waits := make([]time.Duration, len(bidders))
	for i, ms := range v {
		waits[i] = time.Duration(ms) * time.Millisecond
	}
	return waits, nil
}

func bucketKey(lane int, bidder int64) string {
	return "ratelimit:{" + strconv.Itoa(lane) + "}:" + strconv.FormatInt(bidder, 10)
}
