package shard

import (
	"context"
	"sync"
)

// lanes lets one holder at a time per key (a cold auction) go on. Bids on
// one cold auction all wait for its row lock in PostgreSQL anyway; waiting
// here instead holds no connection, and PostgreSQL runs one statement per
// auction at a time rather than waking a queue of them per commit, each
// to re-check the row. An auction is owned by one node, so this is the
// auction's order across the cluster too.
type lanes struct {
	mu sync.Mutex
	m  map[int64]*lane
}

type lane struct {
	turn  chan struct{} // holds a token while someone has the lane
	users int           // holders and waiters; the lane goes at 0
}

func newLanes() *lanes { return &lanes{m: map[int64]*lane{}} }

// enter waits for key's lane, or for ctx; leave gives it back.
func (ls *lanes) enter(ctx context.Context, key int64) (leave func(), err error) {
	ls.mu.Lock()
	l := ls.m[key]
	if l == nil {
		l = &lane{turn: make(chan struct{}, 1)}
		ls.m[key] = l
	}
	l.users++
	ls.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
		return func() { <-l.turn; ls.done(key, l) }, nil
	case <-ctx.Done():
		ls.done(key, l)
		return nil, ctx.Err()
	}
}

func (ls *lanes) done(key int64, l *lane) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l.users--; l.users == 0 {
		delete(ls.m, key)
	}
}
