// Package batch gathers concurrent requests for the same key into one call:
// the hot bids of one lane into one round trip, the token takes of one
// lane, the bids one node forwards to another.
package batch

import (
	"context"
	"slices"
	"sync"
	"time"

	"bidgate"
)

// Batchers runs one goroutine per key (a hot auction, say) that takes
// whatever requests are waiting for that key, up to maxBatch, and decides
// them with one call of run. A lone request goes out at once, and requests
// that arrive while a call is in flight form the next batch; with Gather
// set, also those that arrive within Gather of the previous call's start.
// A key's goroutine leaves it after idle time with nothing queued, and
// stands by as long for a new key before it exits.
type Batchers[K comparable, Req, Res any] struct {
	run      func(ctx context.Context, key K, reqs []Req) ([]Res, error)
	maxBatch int
	maxQueue int
	idle     time.Duration
	// Timeout bounds one run call (5 s unless set before the first Do).
	Timeout time.Duration
	// Observe, if set, is told each batch's size (for metrics).
	Observe func(size int)
	// InFlight is how many calls of run one key may have at once (1
	// unless set before the first Do). Beyond the first, a call starts
	// only for a whole batch (maxBatch waiting): at a few hundred requests
	// a second, waiting for the call in flight gathers the most per call,
	// and a key that fills batches faster than a call returns is not held
	// to maxBatch per round trip. Beyond 1, batches of a key are not
	// decided in order.
	InFlight int
	// Gather, when set before the first Do, is the least time between the
	// starts of two calls of one key. A call costs its round trip however
	// few requests it carries, and at a few hundred requests a second the
	// gap between two is longer than a call: without it nearly every
	// request is a call of its own. A request after a quiet spell still
	// goes out at once, and so does a whole batch; one in a busy key waits
	// at most Gather.
	Gather time.Duration

	mu     sync.Mutex
	queues map[K]*queue[Req, Res]
	// spare hands a new key to a goroutine whose key went idle (serve):
	// every cold auction's first bid is a new key, and a new goroutine grew
	// its stack in every one (a statement's round trip is deep).
	spare chan keyQueue[K, Req, Res]
}

type keyQueue[K comparable, Req, Res any] struct {
	key K
	q   *queue[Req, Res]
}

// queue is one key's waiting requests. It grows with use, not to maxQueue
// up front: a cold auction's first bid makes one, and most never hold more
// than a few.
type queue[Req, Res any] struct {
	calls []call[Req, Res] // under Batchers.mu
	wake  chan struct{}    // holds a token while calls may be waiting
	// holding (under Batchers.mu): a call is in flight and the loop waits
	// for it, or for a whole batch, so a request that fills none does not
	// wake it.
	holding bool
}

type call[Req, Res any] struct {
	req  Req
	done chan outcome[Res]
}

type outcome[Res any] struct {
	res Res
	err error
}

// New returns Batchers that decide up to maxBatch requests per call of run,
// queue up to maxQueue per key, and end a key's goroutine after idle.
func New[K comparable, Req, Res any](maxBatch, maxQueue int, idle time.Duration,
	run func(context.Context, K, []Req) ([]Res, error)) *Batchers[K, Req, Res] {
	return &Batchers[K, Req, Res]{run: run, maxBatch: maxBatch, maxQueue: maxQueue, idle: idle, Timeout: 5 * time.Second, InFlight: 1,
		queues: make(map[K]*queue[Req, Res]), spare: make(chan keyQueue[K, Req, Res])}
}

// Do queues req under key and waits for its result; a full queue is
// bidgate.ErrOverloaded. When ctx ends first the request may still be
// decided; with idempotent requests a retry finds out.
func (b *Batchers[K, Req, Res]) Do(ctx context.Context, key K, req Req) (Res, error) {
	c := call[Req, Res]{req: req, done: make(chan outcome[Res], 1)}
	b.mu.Lock()
	q, ok := b.queues[key]
	if !ok {
		q = &queue[Req, Res]{wake: make(chan struct{}, 1)}
		b.queues[key] = q
		select {
		case b.spare <- keyQueue[K, Req, Res]{key, q}: // a goroutine standing by takes it
		default:
			go b.serve(key, q)
		}
	}
	if len(q.calls) >= b.maxQueue {
		b.mu.Unlock()
		var zero Res
		return zero, bidgate.ErrOverloaded
	}
	q.calls = append(q.calls, c)
	if !q.holding || len(q.calls) >= b.maxBatch {
		select {
		case q.wake <- struct{}{}:
		default: // woken already
		}
	}
	b.mu.Unlock()

	select {
	case o := <-c.done:
		return o.res, o.err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

// Queued is how many requests for key wait for a call of run (those in one
// are not counted).
func (b *Batchers[K, Req, Res]) Queued(key K) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues[key]; q != nil {
		return len(q.calls)
	}
	return 0
}

// full says whether q holds a whole batch already: it goes without
// waiting out Gather, so that Gather never caps a key's rate at maxBatch
// per Gather.
func (b *Batchers[K, Req, Res]) full(q *queue[Req, Res]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(q.calls) >= b.maxBatch
}

// holdUnlessFull says whether q holds a whole batch; if not, q is holding
// until a call ends or one fills.
func (b *Batchers[K, Req, Res]) holdUnlessFull(q *queue[Req, Res]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q.holding = len(q.calls) < b.maxBatch
	return !q.holding
}

// take moves up to maxBatch of q's waiting requests to calls.
func (b *Batchers[K, Req, Res]) take(q *queue[Req, Res], calls []call[Req, Res]) []call[Req, Res] {
	b.mu.Lock()
	defer b.mu.Unlock()
	q.holding = false
	n := min(len(q.calls), b.maxBatch)
	calls = append(calls, q.calls[:n]...)
	rest := copy(q.calls, q.calls[n:])
	clear(q.calls[rest:]) // let the taken calls' results go
	q.calls = q.calls[:rest]
	return calls
}

// serve runs key's loop, then stands by for idle to run a new key's, and
// exits when none comes.
func (b *Batchers[K, Req, Res]) serve(key K, q *queue[Req, Res]) {
	idle := time.NewTimer(b.idle)
	defer idle.Stop()
	for {
		b.loop(key, q)
		idle.Reset(b.idle)
		select {
		case next := <-b.spare:
			key, q = next.key, next.q
		case <-idle.C:
			return
		}
	}
}

func (b *Batchers[K, Req, Res]) loop(key K, q *queue[Req, Res]) {
	timer := time.NewTimer(b.idle)
	defer timer.Stop()
	calls := make([]call[Req, Res], 0, b.maxBatch)
	reqs := make([]Req, 0, b.maxBatch)
	slots := make(chan struct{}, max(b.InFlight, 1))
	var toWorkers chan []call[Req, Res] // when more than one call may be in flight
	if cap(slots) > 1 {
		toWorkers = make(chan []call[Req, Res])
		defer close(toWorkers)
		for range cap(slots) {
			go b.work(key, q, toWorkers, slots)
		}
	}
	var started time.Time // the last call's
	for {
		select {
		case <-q.wake:
		case <-timer.C:
			// Exit only if nothing is waiting; Do queues under the same
			// lock, so no request is left in a queue without a reader.
			b.mu.Lock()
			if len(q.calls) == 0 {
				delete(b.queues, key)
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			timer.Reset(b.idle)
			continue
		}
		for {
			slots <- struct{}{} // while every call is busy, the batch grows
			if len(slots) > 1 && !b.holdUnlessFull(q) {
				<-slots // and while one is, until it is whole; work wakes the loop
				break
			}
			if wait := b.Gather - time.Since(started); wait > 0 && !b.full(q) {
				time.Sleep(wait) // and while the key is busy, for Gather
			}
			if calls = b.take(q, calls[:0]); len(calls) == 0 {
				<-slots
				break
			}
			started = time.Now()
			if toWorkers == nil {
				b.runBatch(key, calls, reqs[:0])
				<-slots
			} else {
				toWorkers <- slices.Clone(calls) // a worker is free: it gave back its slot
			}
		}
		timer.Reset(b.idle)
	}
}

// work runs the batches of one key that loop hands it, each in a slot it
// gives back when done, and then wakes the loop for what waited meanwhile.
// A key's workers live as long as its loop: a goroutine per call started
// with a small stack and grew it in every call (its round trip is deep),
// 2 % of a forwarding node's CPU.
func (b *Batchers[K, Req, Res]) work(key K, q *queue[Req, Res], batches <-chan []call[Req, Res], slots <-chan struct{}) {
	reqs := make([]Req, 0, b.maxBatch)
	for calls := range batches {
		b.runBatch(key, calls, reqs[:0])
		clear(reqs[:len(calls)]) // let the requests go
		<-slots
		select {
		case q.wake <- struct{}{}:
		default: // woken already
		}
	}
}

func (b *Batchers[K, Req, Res]) runBatch(key K, calls []call[Req, Res], reqs []Req) {
	// Requests whose callers gave up are still decided: they may be retried
	// with the same key, and the answer must then be the same.
	for _, c := range calls {
		reqs = append(reqs, c.req)
	}
	if b.Observe != nil {
		b.Observe(len(reqs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	res, err := b.run(ctx, key, reqs)
	cancel()
	for i, c := range calls {
		if err != nil {
			c.done <- outcome[Res]{err: err}
		} else {
			c.done <- outcome[Res]{res: res[i]}
		}
	}
}
