package persist_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"bidgate"
	"bidgate/persist"
	"bidgate/persist/kafka"
)

// BenchmarkPersisterThroughput measures how fast the persister writes
// bid-accepted messages already waiting in Kafka to PostgreSQL (bids/s),
// spread over 100 auctions.
func BenchmarkPersisterThroughput(b *testing.B) {
	p := newPipeline(b)
	auctions := make([]int64, 100)
	for i := range auctions {
		auctions[i] = p.hotAuction().ID
	}
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidAccepted, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	msgs := make([]kafkago.Message, 0, 1000)
	flush := func() {
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			b.Fatal(err)
		}
		msgs = msgs[:0]
	}
	now := time.Now().UTC()
	for i := range b.N {
		a := auctions[i%len(auctions)]
		v, err := json.Marshal(bidgate.BidAccepted{AuctionID: a, BidderID: int64(i + 1), Amount: strconv.Itoa(200+i) + ".00",
			RequestID: uuid.NewString(), Seq: int64(i/len(auctions) + 1), AcceptedAt: now, EndTime: now.Add(time.Hour),
			StreamID: strconv.Itoa(i+1) + "-0"})
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, kafkago.Message{Key: []byte(strconv.FormatInt(a, 10)), Value: v})
		if len(msgs) == cap(msgs) {
			flush()
		}
	}
	if len(msgs) > 0 {
		flush()
	}
	b.ResetTimer()
	start := time.Now()
	p.run(p.persister("bench").Run)
	p.waitForTotal(b.N)
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "bids/s")
}

// BenchmarkHotPipeline drives hot bids through the shard from 256 callers as
// fast as they go (4 auctions), with the relay and a persister running, and
// reports the accept rate and the lag from acceptance (Redis clock) to the
// row in PostgreSQL (its clock; both are this machine's).
func BenchmarkHotPipeline(b *testing.B) {
	p := newPipeline(b)
	auctions := make([]int64, 4)
	for i := range auctions {
		auctions[i] = p.hotAuction().ID
	}
	relay := p.relay(persist.RelayConfig{})
	p.run(relay.Run)
	p.run(p.persister("bench").Run)

	var next, accepted atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				r := bidgate.BidRequest{AuctionID: auctions[n%int64(len(auctions))], BidderID: int64(g + 1),
					Amount: bidgate.FromCents(20000 + 100*n), RequestID: uuid.New()}
				if res, err := p.shard.PlaceBid(context.Background(), r); err == nil && !res.Replayed {
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	bidTime := time.Since(start)
	p.waitForTotal(int(accepted.Load()))
	b.StopTimer()
	var p50, p99 float64
	err := p.db.QueryRow(context.Background(), `SELECT
		percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM created_at - accepted_at)),
		percentile_cont(0.99) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM created_at - accepted_at))
		FROM bid`).Scan(&p50, &p99)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(accepted.Load())/bidTime.Seconds(), "accepted/s")
	b.ReportMetric(p50*1000, "lag-p50-ms")
	b.ReportMetric(p99*1000, "lag-p99-ms")
}
