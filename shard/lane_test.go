package shard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One holder per key at a time, any number of keys at once; a waiter whose
// context ends leaves without the lane; an idle key is forgotten.
func TestLanes(t *testing.T) {
	ls := newLanes()
	var inside [3]atomic.Int32
	var most [3]atomic.Int32
	var wg sync.WaitGroup
	for g := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := int64(g % 3)
			for range 50 {
				leave, err := ls.enter(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside[key].Add(1)
				for {
					m := most[key].Load()
					if n <= m || most[key].CompareAndSwap(m, n) {
						break
					}
				}
				inside[key].Add(-1)
				leave()
			}
		}()
	}
	wg.Wait()
	for k := range most {
		if m := most[k].Load(); m != 1 {
			t.Errorf("key %d: %d holders at once", k, m)
		}
	}

	leave, err := ls.enter(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := ls.enter(ctx, 7); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter past its deadline: %v", err)
	}
	leave()
	if n := len(ls.m); n != 0 {
		t.Fatalf("%d lanes kept after everyone left", n)
	}
}
