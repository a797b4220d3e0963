package shard

import (
	"context"
	"time"

	"bidgate"
	"bidgate/persist/redisstore"
)

// publisher announces a cold auction's new state, any auction's final
// one (a cancel) or its promotion, on its Redis channel; a hot auction's batch script
// publishes its bids' states itself. Viewers may miss one update
// (the next carries a higher seq), so a failure is counted, not returned.
type publisher struct {
	rs      *redisstore.Store
	metrics *metrics
}

func (p *publisher) publish(ctx context.Context, a bidgate.Auction, at time.Time) {
	p.publishUpdate(ctx, redisstore.UpdateOf(a, at))
}

func (p *publisher) publishUpdate(ctx context.Context, u redisstore.Update) {
	if err := p.rs.Publish(ctx, u); err != nil {
		p.metrics.publishFailures.Inc()
	}
}
