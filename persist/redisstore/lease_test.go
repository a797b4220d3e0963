package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/await"
	"bidgate/internal/testredis"
	"bidgate/persist/redisstore"
)

// One holder at a time: the holder keeps the lease, nobody else takes it
// until it is given up or expires, and only its holder can give it up.
func TestLeaseHasOneHolder(t *testing.T) {
	rs := redisstore.New(testredis.Client(t))
	ctx := context.Background()
	name := "test-" + uuid.NewString()
	steps := []struct {
		do     string // hold or release
		holder string
		ttl    time.Duration
		want   bool
	}{
		{"hold", "a", time.Minute, true},
		{"hold", "b", time.Minute, false},
		{"hold", "a", time.Minute, true}, // renewed
		{"release", "b", 0, false},       // not b's to give up
		{"hold", "b", time.Minute, false},
		{"release", "a", 0, false},
		{"hold", "b", time.Minute, true},
		{"hold", "a", time.Minute, false},
		{"release", "b", 0, false},
	}
	for i, s := range steps {
		switch s.do {
		case "hold":
			got, err := rs.HoldLease(ctx, name, s.holder, s.ttl)
			if err != nil {
				t.Fatal(err)
			}
			if got != s.want {
				t.Fatalf("step %d: %s holds %v, want %v", i, s.holder, got, s.want)
			}
		case "release":
			if err := rs.ReleaseLease(ctx, name, s.holder); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A holder that stops renewing loses the lease once it expires.
	if held, err := rs.HoldLease(ctx, name, "a", 50*time.Millisecond); err != nil || !held {
		t.Fatalf("a takes the lease: %v, %v", held, err)
	}
	if held, err := rs.HoldLease(ctx, name, "b", time.Minute); err != nil || held {
		t.Fatalf("b while a holds it: %v, %v", held, err)
	}
	await.Until(t, 10*time.Second, "b takes the lease a stopped renewing", nil, func() (bool, bool) {
		held, err := rs.HoldLease(ctx, name, "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return held, held
	})
	if err := rs.ReleaseLease(ctx, name, "b"); err != nil {
		t.Fatal(err)
	}
}
