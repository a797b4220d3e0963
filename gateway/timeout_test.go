package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate"
)

// A store that did not answer in time is a 503 store_timeout with
// Retry-After, whose detail tells whether the bid may still be decided.
func TestStoreTimeoutAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		undecided  bool
		wantDetail string
	}{
		{"may still be decided", false, "retry with the same Idempotency-Key to learn its outcome"},
		{"not decided", true, "was not carried out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &bidgate.TimeoutError{Undecided: tc.undecided, Err: context.DeadlineExceeded}
			s := serveOn(t, panicky{err: err}, func(context.Context) error { return nil })
			r := s.bid(1, 1, uuid.NewString(), map[string]any{"amount": 5})
			wantProblem(t, r, 503, "store_timeout")
			if r.header.Get("Retry-After") == "" || !strings.Contains(r.raw, tc.wantDetail) {
				t.Fatalf("%s (Retry-After %q); want Retry-After and a detail saying %q", r.raw, r.header.Get("Retry-After"), tc.wantDetail)
			}
		})
	}
}

// /readyz answers within its budget even when a store check hangs past its
// deadline, on both endpoints.
func TestReadyzWithinItsBudget(t *testing.T) {
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) })
	s := serveOn(t, panicky{err: errors.New("unused")}, func(context.Context) error {
		<-hung // a check that ignores its context
		return nil
	})
	for _, srv := range []*testServer{s, s.admin()} {
		start := time.Now()
		r := srv.do("GET", "/readyz", nil)
		if took := time.Since(start); took >= readyTimeout {
			t.Fatalf("%s/readyz answered after %v; want within %v", srv.base, took, readyTimeout)
		}
		wantProblem(t, r, 503, "not_ready")
	}
}
