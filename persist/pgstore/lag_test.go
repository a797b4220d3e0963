package pgstore

import (
	"testing"
	"time"
)

// The lag is the time since the primary was last at a position the
// standby has replayed: 0 when it holds the primary's latest, growing
// while it replays nothing, unknown until it has replayed one seen.
func TestLagTracker(t *testing.T) {
	type step struct {
		after             time.Duration // since the previous step
		primary, replayed int64
		wantLag           time.Duration
		wantKnown         bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"caught up", []step{{0, 100, 100, 0, true}, {time.Second, 200, 200, 0, true}}},
		{"idle: no writes, no lag", []step{{0, 100, 100, 0, true}, {time.Minute, 100, 100, 0, true}}},
		{"stalled replay", []step{
			{0, 100, 100, 0, true},
			{time.Second, 200, 100, time.Second, true},
			{time.Second, 300, 100, 2 * time.Second, true},
			{time.Second, 300, 200, 2 * time.Second, true}, // holds what the primary held two seconds ago
			{time.Second, 300, 300, 0, true},
		}},
		{"stalled while the primary is idle", []step{
			{0, 100, 100, 0, true},
			{time.Second, 200, 100, time.Second, true},
			{time.Second, 200, 100, 2 * time.Second, true},
			{time.Second, 200, 200, 0, true}, // it holds what the primary held a moment ago
		}},
		{"behind from the start", []step{
			{0, 100, 50, 0, false},
			{time.Second, 100, 50, time.Second, false},
			{time.Second, 150, 100, time.Second, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l lagTracker
			at := time.Unix(1_000_000, 0)
			for i, s := range tt.steps {
				at = at.Add(s.after)
				lag, known := l.observe(at, s.primary, s.replayed)
				if lag != s.wantLag || known != s.wantKnown {
					t.Fatalf("step %d: lag %v known %v, want %v %v", i, lag, known, s.wantLag, s.wantKnown)
				}
			}
		})
	}
}

// A standby stalled for longer than the samples kept still reads as far
// behind, never as caught up.
func TestLagTrackerBounded(t *testing.T) {
	var l lagTracker
	at := time.Unix(1_000_000, 0)
	l.observe(at, 0, 0)
	for i := int64(1); i <= 3*maxLagSamples; i++ {
		at = at.Add(time.Second)
		l.observe(at, i, 0)
	}
	if len(l.samples) > maxLagSamples {
		t.Fatalf("%d samples kept", len(l.samples))
	}
	at = at.Add(time.Second)
	if lag, known := l.observe(at, 3*maxLagSamples, 1); !known || lag < 2*maxLagSamples*time.Second {
		t.Fatalf("lag %v (known %v) after replaying a forgotten position", lag, known)
	}
}
