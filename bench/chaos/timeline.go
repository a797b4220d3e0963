//go:build chaos

package chaos

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// timeline is what a fault did and when: the moment it began, the moment
// the system was whole again from the harness's side (the process back and
// serving), and the steps between. Recovery is measured from its end.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	end    time.Time
	events []event
	// problems are things the fault's steps saw go wrong without being
	// unable to go on (a node that exited non-zero on SIGTERM).
	problems []string
}

type event struct {
	at   time.Time
	what string
}

// begin marks the start of the fault.
func (t *timeline) begin(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = time.Now()
	t.events = append(t.events, event{t.start, what})
}

// mark notes a step.
func (t *timeline) mark(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, event{time.Now(), what})
}

// finish marks the end of the fault: everything it took away is back.
func (t *timeline) finish(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.end = time.Now()
	t.events = append(t.events, event{t.end, what})
}

// problem records something wrong that fails the scenario.
func (t *timeline) problem(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.problems = append(t.problems, fmt.Sprintf(format, args...))
}

func (t *timeline) problemList() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.problems...)
}

func (t *timeline) bounds() (start, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.start, t.end
}

// describe lists the steps as offsets from origin (the load's start).
func (t *timeline) describe(origin time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, e := range t.events {
		parts = append(parts, fmt.Sprintf("+%.1fs %s", e.at.Sub(origin).Seconds(), e.what))
	}
	return strings.Join(parts, "; ")
}
