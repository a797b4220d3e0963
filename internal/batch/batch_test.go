package batch

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bidgate"
	"bidgate/internal/await"
)

func TestBatcherGathersWaitingRequests(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := New(64, 100, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			close(running)
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
		v, err := b.Do(context.Background(), 1, i)
		if err != nil {
			t.Error(err)
		}
		results[i] = v
	}
	wg.Add(1)
	go do(0)
	awaitClosed(t, running, "the first request in flight")
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

// waitQueued waits until key's queue holds n requests. Nothing announces
// that a caller has queued (do then blocks on its answer), so this polls.
func waitQueued[K comparable, Req, Res any](t *testing.T, b *Batchers[K, Req, Res], key K, n int) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("%d requests queued under %v", n, key), func() (int, bool) {
		queued := b.Queued(key)
		return queued, queued == n
	})
}

// eventually re-checks cond every millisecond until it holds and returns
// the value it saw then; after limit it fails naming what was awaited and
// the last value seen. Only for state nothing announces.
func eventually[T any](t testing.TB, limit time.Duration, what string, cond func() (T, bool)) T {
	t.Helper()
	return await.Until(t, limit, what, nil, cond)
}

// awaitClosed waits, bounded, until ch is closed.
func awaitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("gave up after 10s waiting for %s", what)
	}
}

func TestBatcherFullQueueIsOverloaded(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	b := New(1, 2, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		if calls.Add(1) == 1 {
			close(running)
		}
		<-release
		return make([]int, len(reqs)), nil
	})
	var wg sync.WaitGroup
	for i := range 3 { // one in flight, two queued
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Do(context.Background(), 1, i); err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}()
		if i == 0 {
			awaitClosed(t, running, "the first request in flight")
		}
	}
	waitQueued(t, b, 1, 2)
	if _, err := b.Do(context.Background(), 1, 99); !errors.Is(err, bidgate.ErrOverloaded) {
		t.Fatalf("full queue: %v, want ErrOverloaded", err)
	}
	close(release)
	wg.Wait()
}

// With an idle time of almost nothing the goroutines exit all the time;
// no request may be stranded in a queue whose reader has gone.
func TestBatcherExitNeverStrandsARequest(t *testing.T) {
	for _, inFlight := range []int{1, 3} {
		t.Run(fmt.Sprintf("in flight %d", inFlight), func(t *testing.T) {
			b := New(8, 1000, time.Microsecond, func(_ context.Context, _ int, reqs []int) ([]int, error) {
				return reqs, nil
			})
			b.InFlight = inFlight
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 2000 {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						v, err := b.Do(ctx, g%3, i)
						cancel()
						if err != nil || v != i {
							t.Errorf("request %d: %d, %v", i, v, err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// A key with several calls in flight runs them on workers that end with
// its goroutine: keys that go idle leave no goroutine behind.
func TestBatcherWorkersEndWithTheirKey(t *testing.T) {
	before := runtime.NumGoroutine()
	b := New(8, 1000, 500*time.Millisecond, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		return reqs, nil
	})
	b.InFlight = 4
	var wg sync.WaitGroup
	for key := range 50 {
		for i := range 20 {
			wg.Go(func() {
				if v, err := b.Do(context.Background(), key, i); err != nil || v != i {
					t.Errorf("key %d, request %d: %d, %v", key, i, v, err)
				}
			})
		}
	}
	wg.Wait()
	if during := runtime.NumGoroutine(); during < before+50*4 {
		t.Fatalf("%d goroutines while 50 keys are busy, want at least %d: a loop and 4 workers each", during, before+50*4)
	}
	eventually(t, 10*time.Second, "the idle keys' goroutines to end", func() (int, bool) {
		n := runtime.NumGoroutine()
		return n, n <= before
	})
}

// A key that went idle leaves its goroutine standing by, and the next new
// key runs on it rather than on a new one, until that stands by too long.
func TestBatcherNewKeyTakesAStandingGoroutine(t *testing.T) {
	ran := map[string]bool{} // the goroutines that ran calls
	b := New(8, 100, 200*time.Millisecond, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		ran[goroutineID()] = true // one call at a time here
		return reqs, nil
	})
	before := runtime.NumGoroutine()
	for key := range 10 {
		if v, err := b.Do(context.Background(), key, key); err != nil || v != key {
			t.Fatalf("key %d: %d, %v", key, v, err)
		}
		eventually(t, 10*time.Second, "the key's loop to go idle", func() (int, bool) {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.queues), len(b.queues) == 0
		})
	}
	if len(ran) != 1 {
		t.Fatalf("10 keys one after another ran on %d goroutines, want 1", len(ran))
	}
	eventually(t, 10*time.Second, "the goroutine standing by to end", func() (int, bool) {
		n := runtime.NumGoroutine()
		return n, n <= before
	})
}

// goroutineID is the calling goroutine's number, from its stack trace.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// With InFlight 2 a key has a second call in flight only for a whole
// batch: what arrives while its one call is busy waits for it, and goes in
// one batch, unless it fills one.
func TestBatcherRunsInFlightCallsAtOnce(t *testing.T) {
	release, started := make(chan struct{}), make(chan int, 10)
	b := New(4, 100, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		started <- len(reqs)
		<-release
		return reqs, nil
	})
	b.InFlight = 2
	var wg sync.WaitGroup
	do := func(from, to int) {
		for i := from; i <= to; i++ {
			wg.Go(func() {
				if v, err := b.Do(context.Background(), 1, i); err != nil || v != i {
					t.Errorf("request %d: %d, %v", i, v, err)
				}
			})
		}
	}
	call := func(what string) int {
		t.Helper()
		select {
		case n := <-started:
			return n
		case <-time.After(10 * time.Second):
			t.Fatalf("gave up after 10s waiting for %s", what)
			return 0
		}
	}
	do(0, 0)
	call("the first call")
	do(1, 3)
	waitQueued(t, b, 1, 3) // not a second call: the batch is not whole
	do(4, 4)
	if n := call("a second call for the whole batch"); n != 4 {
		t.Fatalf("a second call of %d, want the whole batch of 4", n)
	}
	do(5, 7)
	waitQueued(t, b, 1, 3)
	close(release)
	if n := call("the batch of the waiting requests"); n != 3 {
		t.Fatalf("a batch of %d, want the 3 that waited", n)
	}
	wg.Wait()
}

// A key's queue grows with what waits, not to maxQueue up front: every
// cold auction with a bid has one.
func TestBatcherQueueGrowsWithUse(t *testing.T) {
	b := New(8, 1<<20, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		return reqs, nil
	})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for key := range 10 {
		if v, err := b.Do(context.Background(), key, key); err != nil || v != key {
			t.Fatalf("key %d: %d, %v", key, v, err)
		}
	}
	runtime.ReadMemStats(&after)
	// A queue made at its bound would be 16 MiB a key here.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("10 keys with one request each allocated %d bytes", grew)
	}
}

// With Gather, the calls of a busy key start at least Gather apart, and
// what arrives meanwhile is one batch; the first request goes out at once.
func TestBatcherGathersABusyKey(t *testing.T) {
	const gather = 200 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	var sizes []int
	b := New(64, 100, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		mu.Lock()
		starts, sizes = append(starts, time.Now()), append(sizes, len(reqs))
		mu.Unlock()
		return reqs, nil
	})
	b.Gather = gather
	if _, err := b.Do(context.Background(), 1, 0); err != nil { // the first call
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 5 { // arrive well within Gather of the first call
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := b.Do(context.Background(), 1, i); err != nil || v != i {
				t.Errorf("request %d: %d, %v", i, v, err)
			}
		}()
	}
	wg.Wait()
	if _, err := b.Do(context.Background(), 1, 9); err != nil { // a third call
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{1, 5, 1}) {
		t.Fatalf("batch sizes %v, want [1 5 1]", sizes)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < gather {
			t.Errorf("call %d began %v after the one before, under Gather (%v)", i, gap, gather)
		}
	}
}

// A whole batch does not wait out Gather: it would cap a key at maxBatch
// requests per Gather.
func TestBatcherSendsAWholeBatchAtOnce(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	b := New(2, 100, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		if calls.Add(1) == 1 {
			close(running)
			<-release
		}
		return reqs, nil
	})
	b.Gather = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 3 { // one in the first call, then a whole batch of two
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := b.Do(ctx, 1, i); err != nil || v != i {
				t.Errorf("request %d: %d, %v (a whole batch waited for Gather)", i, v, err)
			}
		}()
		if i == 0 {
			awaitClosed(t, running, "the first request in flight")
		}
	}
	waitQueued(t, b, 1, 2)
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

// BenchmarkDeepCall is one request at a time through a key whose calls go
// deep, as a forwarded round trip does (some 20 KiB of stack).
func BenchmarkDeepCall(b *testing.B) {
	for _, inFlight := range []int{1, 2} {
		b.Run(fmt.Sprintf("in flight %d", inFlight), func(b *testing.B) {
			bt := New(64, 4096, time.Minute, func(_ context.Context, _ int, reqs []int) ([]int, error) {
				deep(80)
				return reqs, nil
			})
			bt.InFlight = inFlight
			for i := 0; b.Loop(); i++ {
				if v, err := bt.Do(context.Background(), 1, i); err != nil || v != i {
					b.Fatalf("request %d: %d, %v", i, v, err)
				}
			}
		})
	}
}

// deep uses some 256 bytes of stack a level.
//
//go:noinline
func deep(n int) byte {
	var pad [256]byte
	if n > 0 {
		pad[n%256] = deep(n - 1)
	}
	return pad[n%256]
}

// BenchmarkNewKeys is one request per key, each key new, through calls
// that go deep: a cold auction's first bid.
func BenchmarkNewKeys(b *testing.B) {
	bt := New(64, 4096, 20*time.Microsecond, func(_ context.Context, _ int, reqs []int) ([]int, error) {
		deep(80)
		return reqs, nil
	})
	for i := 0; b.Loop(); i++ {
		if v, err := bt.Do(context.Background(), i, i); err != nil || v != i {
			b.Fatalf("request %d: %d, %v", i, v, err)
		}
	}
}
