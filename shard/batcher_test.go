package shard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"bidgate"
)

func TestBatcherGathersWaitingRequests(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := newBatchers(64, 100, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // hold the first call so that the others queue up
		}
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 2
		}
		return out, nil
	})
	var wg sync.WaitGroup
	results := make([]int, 11)
	do := func(i int) {
		defer wg.Done()
		v, err := b.do(context.Background(), 1, i)
		if err != nil {
			t.Error(err)
		}
		results[i] = v
	}
	wg.Add(1)
	go do(0)
	waitQueued(t, b, 1, 0) // the first request is in flight
	for i := 1; i <= 10; i++ {
		wg.Add(1)
		go do(i)
	}
	waitQueued(t, b, 1, 10)
	close(release)
	wg.Wait()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 10 {
		t.Fatalf("batch sizes %v, want [1 10]", sizes)
	}
	for i, v := range results {
		if v != 2*i {
			t.Fatalf("request %d got %d", i, v)
		}
	}
}

// waitQueued waits until key's queue holds n requests (n = 0: until the
// goroutine has taken everything).
func waitQueued[K comparable, Req, Res any](t *testing.T, b *batchers[K, Req, Res], key K, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b.mu.Lock()
		q, ok := b.queues[key]
		queued := -1
		if ok {
			queued = len(q)
		}
		b.mu.Unlock()
		if queued == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("queue never reached %d requests", n)
}

func TestBatcherFullQueueIsOverloaded(t *testing.T) {
	release := make(chan struct{})
	b := newBatchers(1, 2, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		<-release
		return make([]int, len(reqs)), nil
	})
	var wg sync.WaitGroup
	for i := range 3 { // one in flight, two queued
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = b.do(context.Background(), 1, i) }()
		if i == 0 {
			waitQueued(t, b, 1, 0)
		}
	}
	waitQueued(t, b, 1, 2)
	if _, err := b.do(context.Background(), 1, 99); !errors.Is(err, bidgate.ErrOverloaded) {
		t.Fatalf("full queue: %v, want ErrOverloaded", err)
	}
	close(release)
	wg.Wait()
}

// With an idle time of almost nothing the goroutines exit all the time;
// no request may be stranded in a queue whose reader has gone.
func TestBatcherExitNeverStrandsARequest(t *testing.T) {
	b := newBatchers(8, 1000, time.Microsecond, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		return reqs, nil
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				v, err := b.do(ctx, g%3, i)
				cancel()
				if err != nil || v != i {
					t.Errorf("request %d: %d, %v", i, v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
