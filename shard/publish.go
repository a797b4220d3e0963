package shard

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate"
)

// publisher announces an auction's new state on its Redis channel. Viewers
// may miss one update (the next carries a higher seq), so a failure is
// counted, not returned.
type publisher struct {
	rdb     redis.UniversalClient
	metrics *metrics
}

func (p *publisher) publish(ctx context.Context, a bidgate.Auction, at time.Time) {
	u := bidgate.NewStateUpdate(a)
	u.UpdatedAt = at.UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(u)
	if err := p.rdb.Publish(ctx, bidgate.UpdatesChannel(a.ID), b).Err(); err != nil {
		p.metrics.publishFailures.Inc()
	}
}
