package closer

import (
	"bidgate"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"

	"bidgate/internal/asyncapi"
	"bidgate/internal/testmetrics"
	"bidgate/internal/testport"
	"bidgate/persist"
	pkafka "bidgate/persist/kafka"
	"bidgate/persist/pgstore"
)

// insertEvents puts n unpublished auction-closed rows (aggregates 1..n) in
// the outbox.
func insertEvents(t testing.TB, db *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := db.Exec(ctx, `
INSERT INTO outbox (topic, aggregate_id, payload)
SELECT 'auction-closed', g, json_build_object('auctionId', g, 'winnerId', g + 1, 'finalPrice', g || '.00',
                                              'closedAt', '2026-01-02T03:04:05.678901Z', 'bidCount', 1)
  FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
}

// unpublished counts the unpublished auction events (closes also add
// notices, which these tests do not relay).
func unpublished(t testing.TB, db *pgxpool.Pool) int {
	t.Helper()
	return count(t, db, `SELECT count(*) FROM outbox WHERE published_at IS NULL AND topic <> 'bid-notifications'`)
}

// unpublishedNone is a condition for eventually: the unpublished rows, and
// whether there are none.
func unpublishedNone(t testing.TB, db *pgxpool.Pool) (int, bool) {
	t.Helper()
	n := unpublished(t, db)
	return n, n == 0
}

// checkMessages asserts that msgs carry every auction-closed outbox row,
// keyed by auction id; duplicates are allowed only when identical.
func checkMessages(t testing.TB, db *pgxpool.Pool, msgs []kafka.Message) {
	t.Helper()
	rows := readOutbox(t, db, `topic = 'auction-closed'`)
	want := map[string][]byte{}
	for _, o := range rows {
		if !o.published {
			t.Fatalf("outbox row %d not marked published", o.id)
		}
		want[strconv.FormatInt(o.aggregate, 10)] = o.payload
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		checkContract(t, m)
		payload, ok := want[string(m.Key)]
		if !ok {
			t.Fatalf("message with key %q matches no outbox row", m.Key)
		}
		if !bytes.Equal(m.Value, payload) {
			t.Fatalf("key %s: message %s, outbox payload %s", m.Key, m.Value, payload)
		}
		seen[string(m.Key)] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("%d of %d outbox rows were published", len(seen), len(want))
	}
}

// checkContract asserts that m, as read from the broker, is a message of
// the AsyncAPI document: key, value, and the signature's headers when the
// relay signed (these tests' relays without a key send none).
func checkContract(t testing.TB, m kafka.Message) {
	t.Helper()
	validate := asyncapi.ValidateKafka
	if len(m.Headers) == 0 {
		validate = asyncapi.ValidateKafkaUnsigned
	}
	if err := validate(m); err != nil {
		t.Fatal(err)
	}
}

func startBroker(t testing.TB, port int) *pkafka.Embedded {
	t.Helper()
	b, err := pkafka.StartEmbedded(port, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// readTopic reads n messages of auction-closed from partition 0 (the test
// brokers have one), without a consumer group.
func readTopic(t testing.TB, addrs []string, n int) []kafka.Message {
	t.Helper()
	return readMessages(t, addrs, bidgate.TopicAuctionClosed, n)
}

// readMessages reads n messages of topic from partition 0.
func readMessages(t testing.TB, addrs []string, topic string, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: 0,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("close the reader: %v", err)
		}
	}()
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msgs := make([]kafka.Message, 0, n)
	for len(msgs) < n {
		m, err := r.ReadMessage(readCtx)
		if err != nil {
			t.Fatalf("read message %d of %d: %v", len(msgs)+1, n, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestOutboxRelayToKafka: the events of closed auctions go to a real
// (embedded) broker, one WriteMessages call per batch, and read back equal.
// Rows of other topics are not this relay's.
func TestOutboxRelayToKafka(t *testing.T) {
	const n = 100
	e := newEnv(t, 8, Config{})
	insertColdAuctions(t, e.db, n, -1000, 500)
	if closed, err := e.closer.CloseDue(ctx); err != nil || closed != n {
		t.Fatalf("closed %d: %v", closed, err)
	}
	if _, err := e.db.Exec(ctx, `INSERT INTO outbox (topic, aggregate_id, payload) VALUES ('other-topic', 1, '{}')`); err != nil {
		t.Fatal(err)
	}

	broker := startBroker(t, 0)
	w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
	defer w.Close()
	reg := prometheus.NewRegistry()
	seed := base64.StdEncoding.EncodeToString([]byte("the relays' event-signing key!!!"))
	signer, err := pkafka.ParseSigningKey(seed)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := pkafka.NewVerifier(signer.Public()) // what a consumer holds
	if err != nil {
		t.Fatal(err)
	}
	relay := persist.NewOutboxRelay(e.db, w, persist.OutboxConfig{BatchSize: 40, Signer: signer}, reg)
	var batches []int
	for {
		published, err := relay.PublishPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if published == 0 {
			break
		}
		batches = append(batches, published)
	}
	if len(batches) != 3 || batches[0] != 40 || batches[2] != 20 {
		t.Fatalf("published in batches of %v, want 40, 40, 20", batches)
	}
	if got := testmetrics.Value(t, reg, "bidgate_outbox_published_total"); got != n {
		t.Fatalf("published metric %v, want %d", got, n)
	}
	if left := unpublished(t, e.db); left != 1 {
		t.Fatalf("%d rows left unpublished, want only the other topic's", left)
	}
	msgs := readTopic(t, broker.Addrs(), n)
	for _, m := range msgs {
		if !verifier.Verify(m) {
			t.Fatalf("event of auction %s: no valid signature (headers %v)", m.Key, m.Headers)
		}
		if forged := (kafka.Message{Topic: m.Topic, Key: m.Key, Value: append(m.Value, ' '), Headers: m.Headers}); verifier.Verify(forged) {
			t.Fatal("a changed event verifies")
		}
	}
	checkMessages(t, e.db, msgs)
}

// TestOutboxRelayKafkaFailures: while the writer fails, nothing is marked
// published; the rows go out once it works again, each exactly once here.
func TestOutboxRelayKafkaFailures(t *testing.T) {
	const n = 30
	tests := []struct {
		name   string
		fail   int
		viaRun bool // Run with its backoff rather than PublishPending by hand
	}{
		{"one failure", 1, false},
		{"three failures", 3, false},
		{"Run backs off and retries", 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newEnv(t, 4, Config{}).db
			insertEvents(t, db, n)
			// A real broker, stopped: its port refuses connections until it
			// starts again there.
			port := testport.Free(t)
			down := startBroker(t, port)
			addrs := down.Addrs()
			down.Close()
			w := pkafka.NewWriter(addrs, bidgate.TopicAuctionClosed, pkafka.Security{})
			w.MaxAttempts = 1
			defer w.Close()
			reg := prometheus.NewRegistry()
			relay := persist.NewOutboxRelay(db, w, persist.OutboxConfig{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Log: quiet}, reg)
			failures := func() float64 {
				return testmetrics.Value(t, reg, "bidgate_outbox_publish_failures_total", "cause", "kafka")
			}
			if tc.viaRun {
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- relay.Run(runCtx) }()
				eventually(t, 30*time.Second, fmt.Sprintf("%d failed passes while the broker is down", tc.fail), func() (float64, bool) {
					f := failures()
					return f, f >= float64(tc.fail)
				})
				if left := unpublished(t, db); left != n {
					t.Fatalf("%d rows unpublished while the broker is down, want %d", left, n)
				}
				startBroker(t, port)
				eventually(t, 30*time.Second, "no row left unpublished", func() (int, bool) { return unpublishedNone(t, db) })
				stop()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			} else {
				for i := range tc.fail {
					if published, err := relay.PublishPending(ctx); err == nil || published != 0 {
						t.Fatalf("failing pass %d: published %d, err %v", i, published, err)
					}
					if left := unpublished(t, db); left != n {
						t.Fatalf("%d rows unpublished after a failed write, want %d", left, n)
					}
				}
				if got := failures(); got != float64(tc.fail) {
					t.Fatalf("failures metric %v, want %d", got, tc.fail)
				}
				// Back on its port: the writer finds it again, perhaps after
				// a pass or two that still fail.
				startBroker(t, port)
				eventually(t, 30*time.Second, fmt.Sprintf("a pass publishing all %d rows once the broker is back", n), func() (string, bool) {
					published, err := relay.PublishPending(ctx)
					return fmt.Sprintf("%d published, err %v", published, err), err == nil && published == n
				})
			}
			checkMessages(t, db, readTopic(t, addrs, n))
		})
	}
}

// TestOutboxRelayBrokerDown: a real broker that is down, then back on the
// same port. The relay keeps retrying with back-off; no row is marked
// published until the broker has it.
func TestOutboxRelayBrokerDown(t *testing.T) {
	const n = 50
	db := newEnv(t, 4, Config{}).db
	insertEvents(t, db, n)

	// A port nothing listens on, for now.
	port := testport.Free(t)
	addrs := []string{testport.Loopback(port)}

	w := pkafka.NewWriter(addrs, bidgate.TopicAuctionClosed, pkafka.Security{})
	w.MaxAttempts = 1
	defer w.Close()
	reg := prometheus.NewRegistry()
	relay := persist.NewOutboxRelay(db, w, persist.OutboxConfig{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Log: quiet}, reg)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()

	eventually(t, 20*time.Second, "two failed writes", func() (float64, bool) {
		f := testmetrics.Value(t, reg, "bidgate_outbox_publish_failures_total", "cause", "kafka")
		return f, f >= 2
	})
	if left := unpublished(t, db); left != n {
		t.Fatalf("%d rows unpublished while the broker is down, want %d", left, n)
	}

	broker := startBroker(t, port)
	t0 := time.Now()
	eventually(t, 20*time.Second, "no row left unpublished", func() (int, bool) { return unpublishedNone(t, db) })
	t.Logf("published %v after the broker came back", time.Since(t0))
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkMessages(t, db, readTopic(t, broker.Addrs(), n))
}

// TestTwoOutboxRelays: two relays at once on one outbox, small batches:
// every row is published and marked, any duplicate is identical.
func TestTwoOutboxRelays(t *testing.T) {
	const n = 600
	db := newEnv(t, 8, Config{}).db
	insertEvents(t, db, n)
	broker := startBroker(t, 0)

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	for _, reg := range regs {
		w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
		defer w.Close()
		relay := persist.NewOutboxRelay(db, w, persist.OutboxConfig{BatchSize: 25}, reg)
		wg.Go(func() {
			if err := relay.Run(runCtx); err != nil {
				t.Error(err)
			}
		})
	}
	eventually(t, 30*time.Second, "no row left unpublished", func() (int, bool) { return unpublishedNone(t, db) })
	stop()
	wg.Wait()

	var byRelay []float64
	total := 0
	for _, reg := range regs {
		v := testmetrics.Value(t, reg, "bidgate_outbox_published_total")
		byRelay = append(byRelay, v)
		total += int(v)
	}
	t.Logf("published per relay: %v", byRelay)
	if total < n {
		t.Fatalf("relays published %d, want at least %d", total, n)
	}
	checkMessages(t, db, readTopic(t, broker.Addrs(), total))
}

// A relay vacuums the pending entries of the rows it published, every
// VacuumEvery of them: deleted, they stay until a vacuum, autovacuum comes
// once a minute at most, and every pass and backlog read steps over them.
func TestOutboxRelayCleansWhatItPublished(t *testing.T) {
	const n, every = 3000, 1000
	db := newEnv(t, 4, Config{}).db
	if _, err := db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		t.Fatal(err)
	}
	insertEvents(t, db, n)
	broker := startBroker(t, 0)
	w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
	defer w.Close()
	relay := persist.NewOutboxRelay(db, w, persist.OutboxConfig{BatchSize: 250, VacuumEvery: every}, nil)
	for published := 0; published < n; {
		k, err := relay.PublishPending(ctx)
		if err != nil || k == 0 {
			t.Fatalf("after %d of %d rows, a pass published %d (%v)", published, n, k, err)
		}
		published += k
	}
	// What a pass steps over: the entries in the index's leaf pages (a
	// page's dead tuples themselves go whenever it is read).
	entries := count(t, db, `SELECT coalesce(sum(s.live_items + s.dead_items), 0)::int
  FROM generate_series(1, pg_relation_size('outbox_pending_pkey') / 8192 - 1) b,
       LATERAL bt_page_stats('outbox_pending_pkey', b::int) s
 WHERE s.type = 'l'`)
	if entries >= every {
		t.Fatalf("%d entries left in outbox_pending's index after %d rows published, vacuumed every %d", entries, n, every)
	}
	t.Logf("%d entries left in the index", entries)
}

// TestOneOutboxRelayListens: of the relays of one topic, only the one that
// leads listens (every commit wakes it); the others poll. When the leader
// stops, or its session ends as a crashed node's does, one of the others
// leads within its standby poll, and events still flow.
func TestOneOutboxRelayListens(t *testing.T) {
	e := newEnv(t, 12, Config{})
	broker := startBroker(t, 0)
	const listening = `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND query = 'LISTEN "outbox:auction-closed"'`
	type relay struct {
		reg  *prometheus.Registry
		stop context.CancelFunc
		done chan error
	}
	start := func(standby time.Duration) relay {
		w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
		t.Cleanup(func() { w.Close() })
		r := relay{reg: prometheus.NewRegistry(), done: make(chan error, 1)}
		var runCtx context.Context
		runCtx, r.stop = context.WithCancel(ctx)
		t.Cleanup(r.stop)
		run := persist.NewOutboxRelay(e.db, w, persist.OutboxConfig{PollInterval: time.Hour, StandbyPoll: standby}, r.reg).Run
		go func() { r.done <- run(runCtx) }()
		return r
	}
	leads := func(r relay) func() (float64, bool) {
		return func() (float64, bool) {
			v := testmetrics.Value(t, r.reg, "bidgate_outbox_leading")
			return v, v == 1
		}
	}
	oneListens := func(what string) {
		t.Helper()
		eventually(t, 10*time.Second, what, func() (int, bool) {
			n := count(t, e.db, listening)
			return n, n == 1
		})
	}

	first := start(time.Hour)
	eventually(t, 10*time.Second, "the first relay to lead", leads(first))
	second, third := start(50*time.Millisecond), start(50*time.Millisecond)
	eventually(t, 10*time.Second, "the others to try for the lead", func() (int, bool) {
		n := count(t, e.db, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE '%pg_try_advisory_lock%' AND query NOT LIKE '%pg_stat_activity%'`)
		return n, n >= 1
	})
	oneListens("one relay listening of three")
	e.closePublished(t, "an event published while the first leads")

	first.stop()
	if err := <-first.done; err != nil {
		t.Fatal(err)
	}
	oneListens("one of the others to lead after the first stopped")
	var leader, other relay
	eventually(t, 10*time.Second, "a leader's gauge", func() (bool, bool) {
		if _, ok := leads(second)(); ok {
			leader, other = second, third
			return true, true
		}
		if _, ok := leads(third)(); ok {
			leader, other = third, second
			return true, true
		}
		return false, false
	})
	e.closePublished(t, "an event published after the first stopped")

	// A crash, as PostgreSQL sees it: the leader's session ends.
	if _, err := e.db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND query = 'LISTEN "outbox:auction-closed"'`); err != nil {
		t.Fatal(err)
	}
	oneListens("a relay leading again after the leader's session ended")
	e.closePublished(t, "an event published after the leader's session ended")
	for _, r := range []relay{leader, other} {
		r.stop()
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, e.db, listening); n != 0 {
		t.Fatalf("%d connections still listening after the relays stopped", n)
	}
	checkMessages(t, e.db, readTopic(t, broker.Addrs(), 3))
}

// closePublished closes an auction nobody bid on and waits, naming what,
// until its event is published.
func (e *env) closePublished(t *testing.T, what string) {
	t.Helper()
	a := e.newAuction(t, false, "100", 0)
	e.endInPostgres(t, a.ID)
	if n, err := e.closer.CloseDue(ctx); err != nil || n != 1 {
		t.Fatalf("closed %d: %v", n, err)
	}
	eventually(t, 10*time.Second, what, func() (int, bool) { return unpublishedNone(t, e.db) })
}

// The leader process of TestOutboxLeaderKilled: its database and brokers.
const (
	envLeaderDB      = "BIDGATE_TEST_OUTBOX_LEADER_DB"
	envLeaderBrokers = "BIDGATE_TEST_OUTBOX_LEADER_BROKERS"
)

// TestOutboxLeaderKilled: the relay that leads runs in a process of its
// own and is killed with SIGKILL; PostgreSQL ends its session, and with it
// the lead, and the relay here that polled leads within its standby poll
// and publishes what comes next.
func TestOutboxLeaderKilled(t *testing.T) {
	e := newEnv(t, 8, Config{})
	broker := startBroker(t, 0)
	leader := exec.Command(os.Args[0], "-test.run=^TestOutboxLeaderProcess$", "-test.count=1")
	leader.Env = append(os.Environ(), envLeaderDB+"="+e.dbURL, envLeaderBrokers+"="+strings.Join(broker.Addrs(), ","))
	leader.Stderr = os.Stderr
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := leader.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill the leader process: %v", err)
		}
		_ = leader.Wait() // killed: its status is the signal
	})
	const listening = `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND query = 'LISTEN "outbox:auction-closed"'`
	eventually(t, 20*time.Second, "the other process to lead", func() (int, bool) {
		n := count(t, e.db, listening)
		return n, n == 1
	})

	w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
	defer w.Close()
	reg := prometheus.NewRegistry()
	relay := persist.NewOutboxRelay(e.db, w, persist.OutboxConfig{PollInterval: time.Hour, StandbyPoll: 50 * time.Millisecond}, reg)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()
	insertEvents(t, e.db, 10)
	eventually(t, 10*time.Second, "the events published", func() (int, bool) { return unpublishedNone(t, e.db) })
	if v := testmetrics.Value(t, reg, "bidgate_outbox_leading"); v != 0 {
		t.Fatalf("the relay here leads (%v) while the other process does", v)
	}

	if err := leader.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := leader.Wait(); err == nil {
		t.Fatal("the leader process exited cleanly, not killed")
	}
	eventually(t, 10*time.Second, "the relay here to lead", func() (float64, bool) {
		v := testmetrics.Value(t, reg, "bidgate_outbox_leading")
		return v, v == 1
	})
	e.closePublished(t, "the close published")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkMessages(t, e.db, readTopic(t, broker.Addrs(), 11))
}

// TestOutboxLeaderProcess is TestOutboxLeaderKilled's leader: an outbox
// relay in a process of its own, run until it is killed.
func TestOutboxLeaderProcess(t *testing.T) {
	dbURL := os.Getenv(envLeaderDB)
	if dbURL == "" {
		t.Skip("the leader process of TestOutboxLeaderKilled")
	}
	db, err := pgstore.Open(ctx, pgstore.Config{URL: dbURL, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	w := pkafka.NewWriter(strings.Split(os.Getenv(envLeaderBrokers), ","), bidgate.TopicAuctionClosed, pkafka.Security{})
	if err := persist.NewOutboxRelay(db, w, persist.OutboxConfig{}, nil).Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxRelayWakesOnNotify: with a poll interval far longer than the
// test, the closer's NOTIFY alone gets its event published.
func TestOutboxRelayWakesOnNotify(t *testing.T) {
	e := newEnv(t, 8, Config{})
	broker := startBroker(t, 0)
	w := pkafka.NewWriter(broker.Addrs(), bidgate.TopicAuctionClosed, pkafka.Security{})
	defer w.Close()
	relay := persist.NewOutboxRelay(e.db, w, persist.OutboxConfig{PollInterval: time.Hour}, nil)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(runCtx) }()
	eventually(t, 10*time.Second, "one idle connection listening on the topic's channel", func() (int, bool) {
		n := count(t, e.db, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND query = 'LISTEN "outbox:auction-closed"' AND state = 'idle'`)
		return n, n == 1
	})

	a := e.newAuction(t, false, "100", 0)
	e.bid(t, a.ID, 5, "120")
	e.endInPostgres(t, a.ID)
	if n, err := e.closer.CloseDue(ctx); err != nil || n != 1 {
		t.Fatalf("closed %d: %v", n, err)
	}
	eventually(t, 10*time.Second, "the event published", func() (int, bool) { return unpublishedNone(t, e.db) })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkMessages(t, e.db, readTopic(t, broker.Addrs(), 1))
	// Run gave its connection back to the pool, no longer listening.
	if c := count(t, e.db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`); c != 0 {
		t.Fatalf("%d connections still listening after Run", c)
	}
}

// TestOutboxEventsMatchTheContract: every kind of auction-closed event
// (a winner, nobody bid, below and at a reserve, bought now, cold and hot)
// and auction-cancelled event (cold and hot), as the signed outbox relays
// put them on a real broker, is a message of the AsyncAPI document: key,
// signature headers and value, with no undocumented field; what one pass
// publishes is signed once, as a batch.
func TestOutboxEventsMatchTheContract(t *testing.T) {
	e := newEnv(t, 8, Config{})
	const seller = 9_000_007
	create := func(hot bool, reserve, buyNow string) bidgate.Auction {
		t.Helper()
		n := bidgate.NewAuction{SellerID: seller, Title: "contract lot", StartPrice: decimal.NewFromInt(100),
			MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: hot}
		if reserve != "" {
			n.ReservePrice = decimal.NullDecimal{Decimal: decimal.RequireFromString(reserve), Valid: true}
		}
		if buyNow != "" {
			n.BuyNowPrice = decimal.NullDecimal{Decimal: decimal.RequireFromString(buyNow), Valid: true}
		}
		return e.create(t, n)
	}
	end := func(a bidgate.Auction) {
		t.Helper()
		if a.Mode == bidgate.ModeHot {
			e.setRedisEnd(t, a.ID, -time.Second)
		}
		e.endInPostgres(t, a.ID)
	}
	closedIDs := map[int64]string{}
	for _, hot := range []bool{false, true} {
		won := create(hot, "", "")
		e.bid(t, won.ID, 1, "120")
		e.bid(t, won.ID, 2, "130")
		end(won)
		nobody := create(hot, "", "")
		end(nobody)
		below := create(hot, "180", "")
		e.bid(t, below.ID, 1, "150")
		end(below)
		met := create(hot, "180", "")
		e.bid(t, met.ID, 1, "180")
		end(met)
		bought := create(hot, "", "500")
		r := bidRequest(bought.ID, 3, "0")
		r.Amount, r.BuyNow = decimal.Zero, true
		if _, err := e.shards.PlaceBid(ctx, r); err != nil {
			t.Fatalf("buy now: %v", err)
		}
		for name, a := range map[string]bidgate.Auction{"won": won, "nobody bid": nobody, "below the reserve": below,
			"reserve met": met, "bought now": bought} {
			closedIDs[a.ID] = fmt.Sprintf("%s (hot %v)", name, hot)
		}
	}
	cancelledIDs := map[int64]bool{}
	for _, hot := range []bool{false, true} {
		a := create(hot, "", "")
		if _, err := e.shards.Cancel(ctx, a.ID, seller); err != nil {
			t.Fatal(err)
		}
		cancelledIDs[a.ID] = true
	}
	if _, err := e.closer.CloseDue(ctx); err != nil {
		t.Fatal(err)
	}

	broker := startBroker(t, 0)
	signer, err := pkafka.ParseSigningKey(base64.StdEncoding.EncodeToString([]byte("the relays' event-signing key!!!")))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := pkafka.NewVerifier(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{bidgate.TopicAuctionClosed: len(closedIDs), bidgate.TopicAuctionCancelled: len(cancelledIDs)} {
		w := pkafka.NewWriter(broker.Addrs(), topic, pkafka.Security{})
		defer w.Close()
		relay := persist.NewOutboxRelay(e.db, w, persist.OutboxConfig{Topic: topic, Signer: signer}, prometheus.NewRegistry())
		if n, err := relay.PublishPending(ctx); err != nil || n != want {
			t.Fatalf("%s: published %d, want %d: %v", topic, n, want, err)
		}
		batches := map[string]int{} // messages by their batch's signature
		for _, m := range readMessages(t, broker.Addrs(), topic, want) {
			if err := asyncapi.ValidateKafka(m); err != nil {
				t.Fatal(err)
			}
			if !verifier.Verify(m) {
				t.Fatalf("%s message %s: no valid signature", topic, m.Key)
			}
			for _, h := range m.Headers {
				if h.Key == pkafka.BatchSignatureHeader {
					batches[string(h.Value)]++
				}
			}
			id, err := strconv.ParseInt(string(m.Key), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			var payload struct {
				AuctionID int64 `json:"auctionId"`
			}
			if err := json.Unmarshal(m.Value, &payload); err != nil || payload.AuctionID != id {
				t.Fatalf("%s message with key %s: value %s", topic, m.Key, m.Value)
			}
			if topic == bidgate.TopicAuctionClosed {
				t.Logf("%s: %s", closedIDs[id], m.Value)
				delete(closedIDs, id)
			} else {
				delete(cancelledIDs, id)
			}
		}
		if len(batches) != 1 {
			t.Fatalf("%s: %d messages published together carry %d batch signatures (%v), want one", topic, want, len(batches), batches)
		}
	}
	if len(closedIDs) != 0 || len(cancelledIDs) != 0 {
		t.Fatalf("no event for closed %v, cancelled %v", closedIDs, cancelledIDs)
	}
}
