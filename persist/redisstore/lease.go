package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/lease.lua
	leaseLua    string
	leaseScript = redis.NewScript(leaseLua)
	//go:embed lua/release_lease.lua
	releaseLeaseLua    string
	releaseLeaseScript = redis.NewScript(releaseLeaseLua)
)

// leaseKey is the key of the lease named name.
func leaseKey(name string) string { return "lease:" + name }

// HoldLease takes the lease name for holder, or keeps it if holder has it,
// for ttl from now; it reports whether holder holds it. A holder that stops
// renewing loses it after ttl, so work behind a lease must be safe to run
// twice for that long (and during a failover that loses the key).
func (s *Store) HoldLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	n, err := leaseScript.Run(ctx, s.rdb, []string{leaseKey(name)}, holder, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("hold lease %s: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease gives up the lease name if holder has it, so that another
// takes it at once rather than after its time to live.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := releaseLeaseScript.Run(ctx, s.rdb, []string{leaseKey(name)}, holder).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
