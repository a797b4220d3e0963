package shard

import (
	"context"
	"time"

	"bidgate"
	"bidgate/internal/batch"
	"bidgate/persist/redisstore"
)

// limiter is the per-bidder token bucket, shared by every node through
// Redis. A hot auction's batcher takes its batch's tokens itself (no extra
// hand-off); a cold bid's check waits in its bidder's lane, and the checks
// waiting in one lane go to Redis as one script call.
type limiter struct {
	rs    *redisstore.Store
	rate  float64 // tokens per second; 0 or less: no limit
	burst int
	lanes *batch.Batchers[int, int64, time.Duration]
}

// newLimiter checks rate and burst in Redis, each call bounded by timeout.
func newLimiter(rs *redisstore.Store, rate float64, burst int, timeout time.Duration) *limiter {
	l := &limiter{rs: rs, rate: rate, burst: burst}
	l.lanes = batch.New(256, 16384, 10*time.Second, func(ctx context.Context, _ int, bidders []int64) ([]time.Duration, error) {
		return l.take(ctx, bidders)
	})
	l.lanes.Timeout = timeout
	return l
}

func (l *limiter) off() bool { return l.rate <= 0 }

// allow takes a token for the bidder, or returns a *bidgate.RateLimitedError.
func (l *limiter) allow(ctx context.Context, bidder int64) error {
	if l.off() {
		return nil
	}
	wait, err := l.lanes.Do(ctx, redisstore.LaneOf(bidder), bidder)
	if err != nil {
		return err
	}
	if wait > 0 {
		return &bidgate.RateLimitedError{RetryAfter: wait}
	}
	return nil
}

// take takes a token for each bidder and returns how long each must wait
// (0: allowed).
func (l *limiter) take(ctx context.Context, bidders []int64) ([]time.Duration, error) {
	return l.rs.TakeTokens(ctx, l.rate, l.burst, bidders)
}
