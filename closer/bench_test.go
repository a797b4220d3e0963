package closer

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkCloseBurst measures how fast CloseDue passes drain a burst of
// ended cold auctions (each close with its outbox row), for a few batch
// sizes. The auctions are inserted outside the timer, already ended; ns/op
// is the time of one burst of 10,000.
//
//	go test -run '^$' -bench CloseBurst -benchtime 5x ./closer/
func BenchmarkCloseBurst(b *testing.B) {
	const n = 10000
	for _, batch := range []int{100, 500, 2000} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			e := newEnv(b, 8, Config{BatchSize: batch})
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				insertColdAuctions(b, e.db, n, -1000, 500)
				b.StartTimer()
				start := time.Now()
				closed := 0
				for closed < n {
					c, err := e.closer.CloseDue(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if c == 0 {
						b.Fatalf("closed %d of %d, then nothing", closed, n)
					}
					closed += c
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "auctions/s")
		})
	}
}

// BenchmarkIdlePass measures a pass that finds nothing due among 20,000
// open auctions: what every node pays every Interval in a quiet cluster.
//
//	go test -run '^$' -bench IdlePass -benchmem ./closer/
func BenchmarkIdlePass(b *testing.B) {
	e := newEnv(b, 4, Config{})
	insertColdAuctions(b, e.db, 20000, 3_600_000, 3_600_000)
	if _, err := e.db.Exec(ctx, `ANALYZE auction`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n, err := e.closer.CloseDue(ctx)
		if err != nil || n != 0 {
			b.Fatalf("closed %d, %v; want nothing due", n, err)
		}
	}
}
