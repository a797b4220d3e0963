package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/bucket.lua
	bucketLua string
	//go:embed lua/token_bucket.lua
	tokenBucketLua    string
	tokenBucketScript = redis.NewScript(bucketLua + tokenBucketLua)
)

// Lanes spread bidders' token buckets over hash tags: one script call takes
// the buckets of one lane (one Cluster slot).
const Lanes = 8

// LaneOf is the lane of a bidder's bucket.
func LaneOf(bidder int64) int { return int(bidder % Lanes) }

func bucketKey(bidder int64) string {
	return "ratelimit:{" + strconv.Itoa(LaneOf(bidder)) + "}:" + strconv.FormatInt(bidder, 10)
}

// TakeTokens takes one token from each bidder's bucket (refilled at rate
// per second up to burst, by Redis's clock) and returns how long each must
// wait: 0 when a token was taken. Bidders of several lanes cost one script
// call per lane, pipelined in one round trip.
func (s *Store) TakeTokens(ctx context.Context, rate float64, burst int, bidders []int64) ([]time.Duration, error) {
	var lanes [Lanes][]int // indexes into bidders
	for i, b := range bidders {
		l := LaneOf(b)
		lanes[l] = append(lanes[l], i)
	}
	rateArg := strconv.FormatFloat(rate, 'f', -1, 64)
	var keys [Lanes][]string
	var cmds [Lanes]*redis.Cmd
	pipe := s.rdb.Pipeline()
	for l, idx := range lanes {
		for _, i := range idx {
			keys[l] = append(keys[l], bucketKey(bidders[i]))
		}
		if len(idx) > 0 {
			cmds[l] = tokenBucketScript.EvalSha(ctx, pipe, keys[l], rateArg, burst)
		}
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	waits := make([]time.Duration, len(bidders))
	for l, idx := range lanes {
		if len(idx) == 0 {
			continue
		}
		if redis.HasErrorPrefix(cmds[l].Err(), "NOSCRIPT") {
			// Not loaded on that server yet: nothing ran, so run it again,
			// loading it on the way.
			cmds[l] = tokenBucketScript.Run(ctx, s.rdb, keys[l], rateArg, burst)
		}
		ms, err := cmds[l].Int64Slice()
		if err != nil {
			return nil, unavailable(fmt.Errorf("rate limit: %w", err))
		}
		if len(ms) != len(idx) {
			return nil, fmt.Errorf("rate limit: %d answers for %d bidders", len(ms), len(idx))
		}
		for j, i := range idx {
			waits[i] = time.Duration(ms[j]) * time.Millisecond
		}
	}
	return waits, nil
}
