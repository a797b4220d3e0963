package persist_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/await"
	"bidgate/internal/testmetrics"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// The persisted position counts only bids with none missing before them,
// whatever order they arrive in and however often.
func TestPersistedPositionIsContiguous(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	steps := []struct {
		seqs []int64
		want int64
	}{
		{[]int64{1, 2}, 2},
		{[]int64{4, 5}, 2}, // 3 missing: the position waits
		{[]int64{7}, 2},
		{[]int64{3}, 5},    // the gap closes up to the next one
		{[]int64{5, 4}, 5}, // again: nothing moves
		{[]int64{6}, 7},
	}
	for _, s := range steps {
		var bids []bidgate.BidAccepted
		for _, seq := range s.seqs {
			bids = append(bids, hotBid(a.ID, seq))
		}
		var got map[int64]int64
		err := pgx.BeginFunc(context.Background(), p.db, func(tx pgx.Tx) (err error) {
			w, err := pgstore.WriteHotBids(context.Background(), tx, bids, pgstore.QueueOutbidNotices)
			got = w.Positions
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var pos, count int64
		if err := p.db.QueryRow(context.Background(), `SELECT persisted_seq, bid_count FROM auction WHERE id = $1`, a.ID).Scan(&pos, &count); err != nil {
			t.Fatal(err)
		}
		if got[a.ID] != s.want || pos != s.want || count != s.want {
			t.Fatalf("after seqs %v: position %d (returned %d), bid_count %d; want %d", s.seqs, pos, got[a.ID], count, s.want)
		}
	}
}

func hotBid(auction, seq int64) bidgate.BidAccepted {
	at := time.Now()
	return bidgate.BidAccepted{AuctionID: auction, BidderID: 7, Amount: bidgate.FormatMoney(bidgate.FromCents(10000 + seq*100)),
		RequestID: uuid.NewString(), Seq: seq, AcceptedAt: at, EndTime: at.Add(time.Hour)}
}

// The broker loses messages the relay produced (it restarts forgetting
// everything) and nothing re-feeds them: the reconciler sees the bids
// missing from PostgreSQL, reports them, writes them from the Redis log and
// trims the log once PostgreSQL holds them.
func TestReconcilerRepairsWhatKafkaLost(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	relay := p.relay(persist.RelayConfig{Refeed: time.Hour})
	accepted := p.bid(a.ID, 400, 100)
	if _, err := relay.RelayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.broker.Close() // nobody read them
	p.startBroker(p.port)
	p.run(p.persister("persister").Run)

	reg := prometheus.NewRegistry()
	r := persist.NewReconciler(p.db, p.rdb, persist.ReconcilerConfig{RepairAfter: time.Nanosecond, Batch: 64}, reg)
	res, err := r.ReconcileOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Unpersisted != int64(len(accepted)) || res.Repaired != int64(len(accepted)) || res.Missing != 0 || res.Oldest <= 0 {
		t.Fatalf("first pass: %+v; want %d unpersisted and repaired", res, len(accepted))
	}
	if v := testmetrics.Value(t, reg, "bidgate_unpersisted_bids"); v != float64(len(accepted)) {
		t.Fatalf("bidgate_unpersisted_bids = %v, want %d", v, len(accepted))
	}
	p.checkSame(a, accepted)

	for pass := 0; pass == 0 || res.TrimBacklog; pass++ {
		if pass > len(accepted)/64+1 {
			t.Fatalf("still trimming after %d passes", pass)
		}
		if res, err = r.ReconcileOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if res.Unpersisted != 0 || res.Repaired != 0 || res.Oldest != 0 {
		t.Fatalf("second pass: %+v, want nothing to do", res)
	}
	if n, err := p.rdb.XLen(context.Background(), redisstore.KeysOf(a.ID).Log).Result(); err != nil || n != 0 {
		t.Fatalf("the log still holds %d persisted entries (%v)", n, err)
	}
	if v := testmetrics.Value(t, reg, "bidgate_unpersisted_bids"); v != 0 {
		t.Fatalf("bidgate_unpersisted_bids = %v after the repair", v)
	}
}

// Bids neither in PostgreSQL nor in the Redis log are reported as lost,
// not silently skipped, and the position does not move past them.
func TestReconcilerReportsLostBids(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	accepted := p.bid(a.ID, 50, 100)
	k := redisstore.KeysOf(a.ID)
	first, err := p.rdb.XRangeN(context.Background(), k.Log, "-", "+", 3).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.rdb.XDel(context.Background(), k.Log, first[0].ID, first[1].ID, first[2].ID).Err(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r := persist.NewReconciler(p.db, p.rdb, persist.ReconcilerConfig{RepairAfter: time.Nanosecond}, reg)
	for pass := range 2 {
		res, err := r.ReconcileOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Missing != 3 || res.Unpersisted != int64(len(accepted)) {
			t.Fatalf("pass %d: %+v; want 3 missing of %d unpersisted", pass, res, len(accepted))
		}
	}
	if v := testmetrics.Value(t, reg, "bidgate_unpersisted_lost_bids"); v != 3 {
		t.Fatalf("bidgate_unpersisted_lost_bids = %v, want 3", v)
	}
	var pos int64
	if err := p.db.QueryRow(context.Background(), `SELECT persisted_seq FROM auction WHERE id = $1`, a.ID).Scan(&pos); err != nil {
		t.Fatal(err)
	}
	if pos != 0 {
		t.Fatalf("persisted_seq moved to %d past the lost bids", pos)
	}
}

// A log that starts past the position a pass read is no loss when the
// bids before it were persisted meanwhile and another reconciler trimmed
// them (three nodes race so): the pass reads the position again before it
// reports bids lost.
func TestReconcilerRacedByAnotherWriterReportsNoLoss(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	// Rising bids from many goroutines: some arrive after a higher one and
	// are refused, so bid until more than 10 are in the log.
	for accepted, from := 0, int64(100); accepted <= 10; from += 20 {
		accepted += len(p.bid(a.ID, 20, from))
	}
	reg := prometheus.NewRegistry()
	r := persist.NewReconciler(p.db, p.rdb, persist.ReconcilerConfig{RepairAfter: time.Hour}, reg)
	persist.SetAfterPositions(r, func() {
		// Another node: its persister writes bids 1..10, its reconciler
		// trims them from the log.
		var bids []bidgate.BidAccepted
		for seq := int64(1); seq <= 10; seq++ {
			bids = append(bids, p.logEntry(a.ID, seq))
		}
		if err := pgx.BeginFunc(context.Background(), p.db, func(tx pgx.Tx) error {
			_, err := pgstore.WriteHotBids(context.Background(), tx, bids, pgstore.QueueOutbidNotices)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		k := redisstore.KeysOf(a.ID)
		for _, b := range bids {
			if err := p.rdb.XDel(context.Background(), k.Log, b.StreamID).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	res, err := r.ReconcileOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Missing != 0 {
		t.Fatalf("%+v: %d bids reported lost that are in PostgreSQL", res, res.Missing)
	}
	if v := testmetrics.Value(t, reg, "bidgate_unpersisted_lost_bids"); v != 0 {
		t.Fatalf("bidgate_unpersisted_lost_bids = %v, want 0", v)
	}
}

// Only messages a relay signed with the event-signing key are written, and
// even a signed one never touches an auction that is not open and hot: a
// forged bid-accepted message changes nothing and is counted. A consumer
// holds only the public key: it can verify and cannot sign, and neither
// the public key nor the HMAC under the cluster secret bidgate signed with
// before makes a message the persister takes.
func TestPersisterDropsForgedMessages(t *testing.T) {
	p := newPipeline(t)
	signer, verifier := eventKeys(t, "the relays' event-signing key!!!")
	other, _ := eventKeys(t, "a key that is not the relays' !!")
	hot := p.hotAuction()
	cold, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_001, Title: "cold",
		StartPrice: decimal.NewFromInt(10), MinIncrement: decimal.NewFromInt(1),
		EndTime: time.Now().Add(time.Hour).Truncate(time.Microsecond), ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}

	forged := func(auction int64, key string, sign func(*kafkago.Message), value []byte) kafkago.Message {
		if value == nil {
			b := hotBid(auction, 1)
			b.BidderID, b.Amount, b.EndTime = 666, "123456.00", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			var err error
			if value, err = json.Marshal(b); err != nil {
				t.Fatal(err)
			}
		}
		m := kafkago.Message{Key: []byte(key), Value: value}
		if sign != nil {
			sign(&m)
		}
		return m
	}
	relays := func(m *kafkago.Message) { signer.Sign(m, bidgate.TopicBidAccepted) }
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	msgs := []kafkago.Message{
		forged(hot.ID, id(hot.ID), nil, nil), // unsigned
		forged(hot.ID, id(hot.ID), func(m *kafkago.Message) { other.Sign(m, bidgate.TopicBidAccepted) }, nil),                 // another key
		forged(hot.ID, id(hot.ID), func(m *kafkago.Message) { hmacSign([]byte("cluster secret of the test"), m) }, nil),       // the old HMAC
		forged(hot.ID, id(hot.ID), func(m *kafkago.Message) { withPublicKeyAsSignature(signer, m) }, nil),                     // what a verifier holds
		forged(hot.ID, id(hot.ID), func(m *kafkago.Message) { relays(m); m.Headers[0].Value = m.Headers[0].Value[:10] }, nil), // cut signature
		forged(hot.ID, id(hot.ID), func(m *kafkago.Message) { relays(m); m.Value = append(m.Value, ' ') }, nil),               // changed after signing
		forged(hot.ID, id(cold.ID), relays, nil),                    // key is another auction
		forged(hot.ID, id(hot.ID), relays, []byte(`{"auctionId":`)), // not JSON
		forged(cold.ID, id(cold.ID), relays, nil),                   // signed, but a cold auction
	}
	const rejected = 8
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidAccepted, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidAccepted, "persister", kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	persister := persist.NewPersister(p.db, p.rdb, r, persist.PersisterConfig{Verifier: verifier}, reg)
	p.announce(persister)
	p.run(persister.Run)
	relay := persist.NewRelay(p.db, p.rdb, w, persist.RelayConfig{Signer: signer}, prometheus.NewRegistry())
	p.run(relay.Run)
	accepted := p.bid(hot.ID, 50, 100)
	p.checkSame(hot, accepted) // the relay's signed bids are written

	// Rejections are counted before the batch's hook runs: re-check after each.
	waitFor(t, 30*time.Second, "messages rejected", p.wrote, func() (float64, bool) {
		n := testmetrics.Value(t, reg, "bidgate_persister_rejected_messages_total")
		return n, n >= rejected
	})
	if n := testmetrics.Value(t, reg, "bidgate_persister_rejected_messages_total", "reason", "signature"); n != 6 {
		t.Fatalf("%v messages rejected for their signature, want 6", n)
	}
	var n int
	if err := p.db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE bidder_id = 666`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d forged bids written (%v)", n, err)
	}
	got, err := (&pgstore.Store{DB: p.db}).Auction(context.Background(), cold.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CurrentPrice.Equal(cold.CurrentPrice) || got.LeaderID != 0 || !got.EndTime.Equal(cold.EndTime) || got.BidCount != 0 {
		t.Fatalf("cold auction changed by a message: %+v", got)
	}
}

// TestLogReadersWaitForReplicas: with --redis-wait-replicas the relay and
// the reconciler hand on only log entries a replica holds. On the single
// test Redis, which has none, they hand on nothing and report the Redis
// outage; on a Redis Cluster (make test-cluster) the replicas hold the
// entries and both go through.
func TestLogReadersWaitForReplicas(t *testing.T) {
	p := newPipeline(t)
	_, cluster := p.rdb.(*redis.ClusterClient)
	a := p.hotAuction()
	accepted := p.bid(a.ID, 50, 100)
	wait := redisstore.Replication{Replicas: 1, Timeout: 100 * time.Millisecond}

	relay := p.relay(persist.RelayConfig{Replication: wait})
	n, err := relay.RelayOnce(context.Background())
	switch {
	case cluster && (err != nil || n != len(accepted)):
		t.Fatalf("relay on a cluster: %d of %d bids, %v", n, len(accepted), err)
	case !cluster && (n != 0 || !errors.Is(err, redisstore.ErrNotReplicated) || !errors.Is(err, bidgate.ErrUnavailable)):
		t.Fatalf("relay without a replica: %d bids, %v; want none and ErrNotReplicated", n, err)
	}

	r := persist.NewReconciler(p.db, p.rdb, persist.ReconcilerConfig{RepairAfter: time.Nanosecond, Replication: wait},
		prometheus.NewRegistry())
	res, err := r.ReconcileOnce(context.Background())
	switch {
	case cluster && (err != nil || res.Repaired != int64(len(accepted))):
		t.Fatalf("reconciler on a cluster: %+v, %v", res, err)
	case !cluster && (res.Repaired != 0 || !errors.Is(err, redisstore.ErrNotReplicated)):
		t.Fatalf("reconciler without a replica: %+v, %v; want nothing repaired and ErrNotReplicated", res, err)
	}
	var rows int
	if err := p.db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE auction_id = $1`, a.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{true: len(accepted), false: 0}[cluster]; rows != want {
		t.Fatalf("%d bids in PostgreSQL, want %d", rows, want)
	}
}

// Reconcilers take turns: while one holds the lease the other runs no pass
// and reports 0; when the holder stops, the other takes over at once (the
// lease is given up, not left to expire) and repairs what Kafka lost.
func TestReconcilersTakeTurns(t *testing.T) {
	p := newPipeline(t)
	a := p.hotAuction()
	cfg := persist.ReconcilerConfig{Interval: 5 * time.Millisecond, RepairAfter: time.Nanosecond, Lease: time.Minute}
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	stopA := p.run(persist.NewReconciler(p.db, p.rdb, cfg, regA).Run)
	awaitMetric(t, regA, "bidgate_reconciler_lease_held", 1)
	p.run(persist.NewReconciler(p.db, p.rdb, cfg, regB).Run)

	first := p.bid(a.ID, 100, 100) // never relayed: only a reconciler writes them
	awaitMetric(t, regA, "bidgate_reconciler_repaired_bids_total", float64(len(first)))
	for _, m := range []string{"bidgate_reconciler_lease_held", "bidgate_reconciler_repaired_bids_total", "bidgate_unpersisted_bids"} {
		if v := testmetrics.Value(t, regB, m); v != 0 {
			t.Fatalf("the reconciler without the lease: %s = %v, want 0", m, v)
		}
	}

	stopA()
	second := p.bid(a.ID, 100, 1000)
	awaitMetric(t, regB, "bidgate_reconciler_repaired_bids_total", float64(len(second)))
	if v := testmetrics.Value(t, regB, "bidgate_reconciler_lease_held"); v != 1 {
		t.Fatalf("the reconciler that took over: lease held %v", v)
	}
	if v := testmetrics.Value(t, regA, "bidgate_reconciler_repaired_bids_total"); v != float64(len(first)) {
		t.Fatalf("the stopped reconciler repaired %v bids, want %d", v, len(first))
	}
	all := first
	for k := range second {
		all[k] = true
	}
	p.checkSame(a, all)
}

// awaitMetric waits until reg's metric name reads want.
func awaitMetric(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	await.Until(t, 20*time.Second, fmt.Sprintf("%s = %v", name, want), nil, func() (float64, bool) {
		v := testmetrics.Value(t, reg, name)
		return v, v == want
	})
}
