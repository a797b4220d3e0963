package persist_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testmetrics"
	"bidgate/persist"
	"bidgate/persist/redisstore"
)

// bidInTurn places n bids one after the other, each from a bidder of its
// own and an increment above the last, and fails unless each is accepted.
func (p *pipeline) bidInTurn(auction int64, n int, from int64) {
	p.t.Helper()
	for i := range int64(n) {
		r := bidgate.BidRequest{AuctionID: auction, BidderID: from + i, Amount: decimal.NewFromInt(from + i), RequestID: uuid.New()}
		if _, err := p.shard.PlaceBid(context.Background(), r); err != nil {
			p.t.Fatalf("bid %d: %v", i+1, err)
		}
	}
}

// waitRelayedBids waits until the relay on reg has produced n bids, and
// returns how many passes it took.
func waitRelayedBids(t *testing.T, reg *prometheus.Registry, n int) int {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d bids relayed", n), nil, func() (float64, bool) {
		got := testmetrics.Value(t, reg, "bidgate_relay_bids_total")
		return got, got >= float64(n)
	})
	return int(testmetrics.Value(t, reg, "bidgate_relay_passes_total"))
}

// Bids accepted while the relay gathers go out in its next pass, however
// often the shard wakes it: nine bids placed one at a time after the first
// was produced take one more pass, not nine.
func TestRelayGathersBids(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	reg := prometheus.NewRegistry()
	relay := p.relayOn(persist.RelayConfig{Gather: 3 * time.Second}, reg)
	p.run(relay.Run)

	p.bidInTurn(a.ID, 1, 101)
	relay.Notify(a.ID)
	if passes := waitRelayedBids(t, reg, 1); passes != 1 {
		t.Fatalf("the first bid took %d passes", passes)
	}
	for i := range int64(9) {
		p.bidInTurn(a.ID, 1, 201+i)
		relay.Notify(a.ID) // as the shard does after every batch it decides
	}
	if passes := waitRelayedBids(t, reg, 10); passes != 2 {
		t.Errorf("10 bids, the last 9 accepted within the gather, took %d passes; want 2", passes)
	}
}

// A pass that stopped at its batch limit leaves a backlog: the next starts
// at once, not after the gather.
func TestRelayBacklogSkipsTheGather(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	p.bidInTurn(a.ID, 10, 101)
	reg := prometheus.NewRegistry()
	relay := p.relayOn(persist.RelayConfig{Batch: 4, Gather: time.Hour}, reg)
	p.run(relay.Run)
	relay.Notify(a.ID)
	if passes := waitRelayedBids(t, reg, 10); passes != 3 {
		t.Errorf("10 bids at 4 a pass took %d passes; want 3", passes)
	}
}

// An idle relay slows down. Its closed auctions are followed for an hour
// (Linger), and a pass every Interval read each one's cursors fifty times a
// second for nothing: passes that find nothing now come at doubling
// intervals, up to MaxInterval (1 s by default).
func TestIdleRelaySlowsDown(t *testing.T) {
	const window = 1500 * time.Millisecond
	p := newPipeline(t)
	a := p.hotAuction()
	looks := countLooks(p.rdb, a.ID)
	reg := prometheus.NewRegistry()
	relay := p.relayOn(persist.RelayConfig{}, reg)
	p.run(relay.Run)
	p.bidInTurn(a.ID, 1, 101)
	relay.Notify(a.ID)
	waitRelayedBids(t, reg, 1)
	before := looks.Load()
	time.Sleep(window) // the window whose passes are counted
	// 20+40+...+640 ms: 6 passes; a pass every 20 ms would be 75.
	if n := looks.Load() - before; n > 15 {
		t.Fatalf("an idle relay read the auction's cursors %d times in %v, want at most 15", n, window)
	}
}

// countLooks counts the relay's reads of an auction's cursors on rdb: the
// pipelines that read the newest entry of its log.
func countLooks(rdb redis.UniversalClient, auctionID int64) *atomic.Int64 {
	h := &lookCounter{log: redisstore.KeysOf(auctionID).Log}
	rdb.AddHook(h)
	return &h.n
}

type lookCounter struct {
	log string
	n   atomic.Int64
}

func (h *lookCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *lookCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *lookCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "xrevrange" && args[1] == h.log {
				h.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}
