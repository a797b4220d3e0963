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
// Checks waiting at the same time go to Redis in one pipeline.
type limiter struct {
	rdb   redis.UniversalClient
	rate  float64 // tokens per second
	burst int
	batch *batchers[int, int64, time.Duration]
}

// lanes is how many pipelines may be in flight at once.
const lanes = 4

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

// check runs the bucket script for each bidder in one pipeline and returns
// how long each must wait (0: allowed).
func (l *limiter) check(ctx context.Context, _ int, bidders []int64) ([]time.Duration, error) {
	rate, burst := strconv.FormatFloat(l.rate, 'f', -1, 64), strconv.Itoa(l.burst)
	run := func() ([]*redis.Cmd, error) {
		pipe := l.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(bidders))
		for i, b := range bidders {
			cmds[i] = tokenBucketScript.EvalSha(ctx, pipe, []string{bucketKey(b)}, rate, burst)
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis restarted or failed over: load the script and try once more.
		if err = tokenBucketScript.Load(ctx, l.rdb).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("rate limit: %w", err))
	}
	waits := make([]time.Duration, len(bidders))
	for i, c := range cmds {
		v, err := c.Int64Slice()
		if err != nil || len(v) != 2 {
			return nil, fmt.Errorf("rate limit: bad reply %v: %w", c.Val(), err)
		}
		if v[0] == 0 {
			waits[i] = time.Duration(max(v[1], 1)) * time.Millisecond
		}
	}
	return waits, nil
}

func bucketKey(bidder int64) string { return "ratelimit:{" + strconv.FormatInt(bidder, 10) + "}" }
