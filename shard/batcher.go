package shard

import (
	"context"
	"sync"
	"time"

	"bidgate"
)

// batchers runs one goroutine per key (a hot auction, say) that takes
// whatever requests are waiting for that key, up to maxBatch, and decides
// them with one call of run. There is no artificial delay: a lone request
// goes out at once, and requests that arrive while a call is in flight form
// the next batch. A goroutine exits after idle time with nothing queued.
type batchers[K comparable, Req, Res any] struct {
	run      func(ctx context.Context, key K, reqs []Req) ([]Res, error)
	maxBatch int
	maxQueue int
	idle     time.Duration
	timeout  time.Duration  // of one run call
	observe  func(size int) // batch size, for metrics; may be nil

	mu     sync.Mutex
	queues map[K]chan call[Req, Res]
}

type call[Req, Res any] struct {
	req  Req
	done chan outcome[Res]
}

type outcome[Res any] struct {
	res Res
	err error
}

func newBatchers[K comparable, Req, Res any](maxBatch, maxQueue int, idle time.Duration,
	run func(context.Context, K, []Req) ([]Res, error)) *batchers[K, Req, Res] {
	return &batchers[K, Req, Res]{run: run, maxBatch: maxBatch, maxQueue: maxQueue, idle: idle, timeout: 5 * time.Second,
		queues: make(map[K]chan call[Req, Res])}
}

// do queues req under key and waits for its result. When ctx ends first the
// request may still be decided; with idempotent requests a retry finds out.
func (b *batchers[K, Req, Res]) do(ctx context.Context, key K, req Req) (Res, error) {
	c := call[Req, Res]{req: req, done: make(chan outcome[Res], 1)}
	b.mu.Lock()
	q, ok := b.queues[key]
	if !ok {
		q = make(chan call[Req, Res], b.maxQueue)
		b.queues[key] = q
		go b.loop(key, q)
	}
	select {
	case q <- c:
	default:
		b.mu.Unlock()
		var zero Res
		return zero, bidgate.ErrOverloaded
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

func (b *batchers[K, Req, Res]) loop(key K, q chan call[Req, Res]) {
	timer := time.NewTimer(b.idle)
	defer timer.Stop()
	calls := make([]call[Req, Res], 0, b.maxBatch)
	reqs := make([]Req, 0, b.maxBatch)
	for {
		select {
		case c := <-q:
			calls = append(calls[:0], c)
		case <-timer.C:
			// Exit only if nothing arrived meanwhile; do holds the lock while
			// it queues, so no request is left in a queue without a reader.
			b.mu.Lock()
			if len(q) == 0 {
				delete(b.queues, key)
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			timer.Reset(b.idle)
			continue
		}
	drain:
		for len(calls) < b.maxBatch {
			select {
			case c := <-q:
				calls = append(calls, c)
			default:
				break drain
			}
		}
		b.runBatch(key, calls, reqs[:0])
		timer.Reset(b.idle)
	}
}

func (b *batchers[K, Req, Res]) runBatch(key K, calls []call[Req, Res], reqs []Req) {
	// Requests whose callers gave up are still decided: they may be retried
	// with the same key, and the answer must then be the same.
	for _, c := range calls {
		reqs = append(reqs, c.req)
	}
	if b.observe != nil {
		b.observe(len(reqs))
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
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
