package persist_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/asyncapi"
	"bidgate/internal/testmetrics"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/redisstore"
)

// notifier starts a notifier verifying with v, metrics on its own registry.
func (p *pipeline) notifier(v *kafka.Verifier) *prometheus.Registry {
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidNotifications, "notifier", kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	reg := prometheus.NewRegistry()
	p.run(persist.NewNotifier(p.db, p.rdb, r, persist.NotifierConfig{Verifier: v}, reg).Run)
	return reg
}

// subscribe listens to user's notice channel until the test ends.
func (p *pipeline) subscribe(user int64) <-chan *redis.Message {
	p.t.Helper()
	sub := p.rdb.SSubscribe(context.Background(), redisstore.NoticeChannel(user))
	if _, err := sub.Receive(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = sub.Close() })
	return sub.Channel()
}

// nextNotice reads the next notice published on ch.
func nextNotice(t *testing.T, ch <-chan *redis.Message) bidgate.Notice {
	t.Helper()
	select {
	case m := <-ch:
		var n bidgate.Notice
		if err := json.Unmarshal([]byte(m.Payload), &n); err != nil {
			t.Fatalf("published notice %q: %v", m.Payload, err)
		}
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notice published within 30s")
	}
	return bidgate.Notice{}
}

// A cold bid that takes the lead reaches the replaced leader: the outbox
// relay (signing) to bid-notifications, the notifier (verifying) to
// PostgreSQL and the leader's Redis channel.
func TestOutbidNoticeReachesTheUser(t *testing.T) {
	p := newPipeline(t)
	signer, verifier := eventKeys(t, "0123456789abcdef0123456789abcdef")
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidNotifications, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	p.run(persist.NewOutboxRelay(p.db, w, persist.OutboxConfig{Topic: bidgate.TopicBidNotifications, Signer: signer}, prometheus.NewRegistry()).Run)
	reg := p.notifier(verifier)

	a, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_001, Title: "cold lot",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const alice, bob = 8_000_001, 8_000_002
	notices := p.subscribe(alice)
	p.place(a, alice, 110)
	p.place(a, bob, 120)
	n := nextNotice(t, notices)
	want := bidgate.Notice{ID: fmt.Sprintf("outbid-%d-2", a.ID), Type: bidgate.NoticeOutbid, UserID: alice, AuctionID: a.ID,
		Title: "cold lot", Price: "120.00", MaxAmount: "110.00", At: n.At}
	if n != want || n.At.IsZero() {
		t.Fatalf("published %+v, want %+v", n, want)
	}
	if got := p.storedNotices(alice); len(got) != 1 || got[0] != want.ID {
		t.Fatalf("stored %v, want [%s]", got, want.ID)
	}
	if v := testmetrics.Value(t, reg, "bidgate_notices_stored_total", "type", "outbid"); v != 1 {
		t.Fatalf("stored metric %v, want 1", v)
	}
	// On the topic, it is what the AsyncAPI document says.
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidNotifications, "contract", kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := asyncapi.ValidateKafka(m); err != nil {
		t.Fatal(err)
	}
}

// The notifier stores a notice once however often it comes, publishes it
// once, and drops what bidgate did not sign or what is not what it claims
// (a key that is not the notice's user, an unknown type).
func TestNotifierStoresOnceAndDropsForgeries(t *testing.T) {
	p := newPipeline(t)
	signer, verifier := eventKeys(t, "0123456789abcdef0123456789abcdef")
	forgerKey, _ := eventKeys(t, "fedcba9876543210fedcba9876543210")
	const user = 8_000_003
	ch := p.subscribe(user)
	reg := p.notifier(verifier)
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	notice := func(id string, typ bidgate.NoticeType) bidgate.Notice {
		return bidgate.Notice{ID: id, Type: typ, UserID: user, AuctionID: 5, Title: "lot", Price: "10.00", At: at}
	}
	message := func(n bidgate.Notice, key int64, s *kafka.Signer) kafkago.Message {
		v, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		m := kafkago.Message{Key: []byte(strconv.FormatInt(key, 10)), Value: v}
		s.Sign(&m, bidgate.TopicBidNotifications)
		return m
	}
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidNotifications, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	// One key, one partition: in this order.
	msgs := []kafkago.Message{
		message(notice("outbid-5-2", bidgate.NoticeOutbid), user, signer),
		message(notice("outbid-5-2", bidgate.NoticeOutbid), user, signer),    // again
		message(notice("outbid-5-3", bidgate.NoticeOutbid), user, forgerKey), // not bidgate's
		message(notice("won-5", "crowned"), user, signer),                    // no such type
		message(notice("won-5", bidgate.NoticeWon), user, signer),
	}
	other := notice("outbid-5-4", bidgate.NoticeOutbid)
	other.UserID = user + 1 // keyed by user, for user + 1
	msgs = append(msgs[:3], append([]kafkago.Message{message(other, user, signer)}, msgs[3:]...)...)
	// Signed, but a member named twice: which one counts is up to the
	// reader, so neither does.
	twice := message(notice("outbid-5-5", bidgate.NoticeOutbid), user, signer)
	twice.Value = append(bytes.TrimSuffix(twice.Value, []byte("}")), []byte(`,"price":"99.00"}`)...)
	twice.Headers = nil
	signer.Sign(&twice, bidgate.TopicBidNotifications)
	msgs = append(msgs, twice)
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	if n := nextNotice(t, ch); n.ID != "outbid-5-2" {
		t.Fatalf("first notice published %s, want outbid-5-2", n.ID)
	}
	if n := nextNotice(t, ch); n.ID != "won-5" {
		t.Fatalf("second notice published %s, want won-5 (outbid-5-2 once, the rest dropped)", n.ID)
	}
	if got := p.storedNotices(user); fmt.Sprint(got) != "[outbid-5-2 won-5]" {
		t.Fatalf("stored %v, want [outbid-5-2 won-5]", got)
	}
	if got := p.storedNotices(user + 1); len(got) != 0 {
		t.Fatalf("stored for user+1: %v", got)
	}
	// The second copy of outbid-5-2 is skipped as known, unverified.
	if v := testmetrics.Value(t, reg, "bidgate_notifier_known_messages_total"); v != 1 {
		t.Fatalf("known messages %v, want 1", v)
	}
	for reason, want := range map[string]float64{"signature": 1, "malformed": 3} {
		if v := testmetrics.Value(t, reg, "bidgate_notifier_rejected_messages_total", "reason", reason); v != want {
			t.Fatalf("rejected (%s) %v, want %v", reason, v, want)
		}
	}
}

// storedNotices lists user's stored notice ids in the order stored.
func (p *pipeline) storedNotices(user int64) []string {
	p.t.Helper()
	rows, err := p.db.Query(context.Background(), `SELECT id FROM notification WHERE user_id = $1 ORDER BY n`, user)
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			p.t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	return ids
}

// A hot bid that takes the lead tells the leader it replaced: the Redis log
// entry names them, and the persister stores the notice with the row and
// pushes it, with no outbox row, Kafka message or notifier on the way. A
// proxy leader overtaken by a higher maximum is told with their own
// maximum; a bid the leader's proxy answered replaced nobody.
func TestHotOutbidNoticesComeWithTheirRows(t *testing.T) {
	p := newPipeline(t)
	p.run(p.relay(persist.RelayConfig{}).Run)
	reg := prometheus.NewRegistry()
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidAccepted, "persister", kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	p.run(persist.NewPersister(p.db, p.rdb, r, persist.PersisterConfig{}, reg).Run)

	a := p.auction() // hot, at 1000 rising by 100
	const alice, bob, carol, dave, eve = 8_100_001, 8_100_002, 8_100_003, 8_100_004, 8_100_005
	channels := map[int64]<-chan *redis.Message{}
	for _, u := range []int64{alice, bob, carol} {
		channels[u] = p.subscribe(u)
	}
	bid := func(user, amount int64, proxy bool) {
		t.Helper()
		if _, err := p.shard.PlaceBid(context.Background(), bidgate.BidRequest{AuctionID: a.ID, BidderID: user,
			Amount: decimal.NewFromInt(amount), Proxy: proxy, RequestID: uuid.New()}); err != nil {
			t.Fatalf("bid %d by %d: %v", amount, user, err)
		}
	}
	bid(alice, 1100, false) // seq 1
	bid(bob, 1200, false)   // seq 2: alice outbid
	bid(carol, 2000, true)  // seq 3 at 1300: bob outbid
	bid(dave, 1500, false)  // seq 4, answered by carol's proxy (seq 5): nobody outbid
	bid(eve, 3000, true)    // seq 6 at 2100: carol outbid, her maximum 2000
	for _, want := range []struct {
		user       int64
		seq        int64
		price, max string
	}{
		{alice, 2, "1200.00", "1100.00"},
		{bob, 3, "1300.00", "1200.00"},
		{carol, 6, "2100.00", "2000.00"},
	} {
		n := nextNotice(t, channels[want.user])
		if n.ID != fmt.Sprintf("outbid-%d-%d", a.ID, want.seq) || n.Type != bidgate.NoticeOutbid || n.UserID != want.user ||
			n.Price != want.price || n.MaxAmount != want.max || n.Title != "hot" {
			t.Fatalf("user %d was told %+v; want outbid by seq %d at %s, their maximum %s", want.user, n, want.seq, want.price, want.max)
		}
	}
	// Carol's notice came with row 6, so rows 1-6 are in PostgreSQL: had
	// row 4 told dave anything, it would be stored.
	for _, u := range []int64{alice, bob, carol, dave, eve} {
		want := map[int64]int{alice: 1, bob: 1, carol: 1}[u]
		if got := p.storedNotices(u); len(got) != want {
			t.Fatalf("user %d has notices %v, want %d", u, got, want)
		}
	}
	var queued int
	if err := p.db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE topic = 'bid-notifications'`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != 0 {
		t.Fatalf("%d notices in the outbox; the persister stores them itself", queued)
	}
	if v := testmetrics.Value(t, reg, "bidgate_persister_notices_stored_total"); v != 3 {
		t.Fatalf("bidgate_persister_notices_stored_total %v, want 3", v)
	}
}

// A notice whose outbox row reached Kafka but never the notifier (a broker
// killed after acknowledging it forgets it) is stored by the sweep from the
// row, once the row has been published longer than the grace; the sweep
// never passes a row not yet published, nor one still within the grace.
func TestSweepStoresTheNoticesKafkaLost(t *testing.T) {
	p := newPipeline(t)
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidNotifications, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	relay := persist.NewOutboxRelay(p.db, w, persist.OutboxConfig{Topic: bidgate.TopicBidNotifications}, prometheus.NewRegistry())
	a, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_002, Title: "swept lot",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const alice, bob = 8_000_011, 8_000_012
	notices, bobsNotices := p.subscribe(alice), p.subscribe(bob)
	p.place(a, alice, 110)
	p.place(a, bob, 120) // outbid-<a>-2 to alice, in the outbox
	// Published to Kafka, where no notifier reads it: as good as lost.
	if n, err := relay.PublishPending(context.Background()); err != nil || n != 1 {
		t.Fatalf("published %d outbox rows (%v), want 1", n, err)
	}
	p.place(a, alice, 130) // outbid-<a>-3 to bob, not published yet

	sweep := func(grace time.Duration) (int, *prometheus.Registry) {
		t.Helper()
		reg := prometheus.NewRegistry()
		n := persist.NewNotifier(p.db, p.rdb, nil, persist.NotifierConfig{SweepGrace: grace}, reg)
		checked, err := n.SweepOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return checked, reg
	}
	if checked, _ := sweep(time.Hour); checked != 0 {
		t.Fatalf("within the grace the sweep checked %d rows, want 0", checked)
	}
	if got := p.storedNotices(alice); len(got) != 0 {
		t.Fatalf("stored within the grace: %v", got)
	}
	checked, reg := sweep(time.Nanosecond)
	if checked != 1 {
		t.Fatalf("the sweep checked %d rows, want 1 (it stops at the unpublished one)", checked)
	}
	want := fmt.Sprintf("outbid-%d-2", a.ID)
	if got := p.storedNotices(alice); len(got) != 1 || got[0] != want {
		t.Fatalf("stored %v, want [%s]", got, want)
	}
	if n := nextNotice(t, notices); n.ID != want || n.Title != "swept lot" {
		t.Fatalf("published %+v, want %s", n, want)
	}
	if v := testmetrics.Value(t, reg, "bidgate_notices_recovered_total"); v != 1 {
		t.Fatalf("recovered metric %v, want 1", v)
	}
	if got := p.storedNotices(bob); len(got) != 0 {
		t.Fatalf("the unpublished notice was swept: %v", got)
	}
	// Published and stored the usual way, the next row is checked, not
	// stored twice.
	if n, err := relay.PublishPending(context.Background()); err != nil || n != 1 {
		t.Fatalf("published %d outbox rows (%v), want 1", n, err)
	}
	p.notifier(nil)
	bobs := fmt.Sprintf("outbid-%d-3", a.ID)
	if n := nextNotice(t, bobsNotices); n.ID != bobs {
		t.Fatalf("published %s to bob, want %s", n.ID, bobs)
	}
	checked, reg = sweep(time.Nanosecond)
	if checked != 1 || testmetrics.Value(t, reg, "bidgate_notices_recovered_total") != 0 {
		t.Fatalf("the sweep checked %d rows and recovered %v, want 1 and 0", checked, testmetrics.Value(t, reg, "bidgate_notices_recovered_total"))
	}
	if got := p.storedNotices(bob); fmt.Sprint(got) != "["+bobs+"]" {
		t.Fatalf("stored for bob %v, want [%s]", got, bobs)
	}
}

// countingWriter counts the messages it passes on to w.
type countingWriter struct {
	w    persist.Writer
	sent int
}

func (c *countingWriter) WriteMessages(ctx context.Context, msgs ...kafkago.Message) error {
	c.sent += len(msgs)
	return c.w.WriteMessages(ctx, msgs...)
}

// An outbox notice whose notice is stored already (its other copy came
// first) is marked published without being sent; one not stored is sent.
func TestOutboxSkipsStoredNotices(t *testing.T) {
	p := newPipeline(t)
	kw := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidNotifications, kafka.Security{})
	p.closeAtEnd("writer", kw.Close)
	w := &countingWriter{w: kw}
	reg := prometheus.NewRegistry()
	relay := persist.NewOutboxRelay(p.db, w, persist.OutboxConfig{Topic: bidgate.TopicBidNotifications}, reg)
	a, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_003, Title: "skipped lot",
		StartPrice: decimal.NewFromInt(100), MinIncrement: decimal.NewFromInt(1), EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const alice, bob = 8_000_021, 8_000_022
	p.place(a, alice, 110)
	p.place(a, bob, 120) // outbid-<a>-2 to alice, in the outbox
	stored := fmt.Sprintf("outbid-%d-2", a.ID)
	if _, err := p.db.Exec(context.Background(), `INSERT INTO notification (id, user_id, type, auction_id, title, price, at)
VALUES ($1, $2, 'outbid', $3, 'skipped lot', 120.00, clock_timestamp())`, stored, alice, a.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := relay.PublishPending(context.Background()); err != nil || n != 1 || w.sent != 0 {
		t.Fatalf("marked %d rows (%v), sent %d; want 1 marked, none sent", n, err, w.sent)
	}
	if v := testmetrics.Value(t, reg, "bidgate_outbox_delivered_total"); v != 1 {
		t.Fatalf("delivered metric %v, want 1", v)
	}
	p.place(a, alice, 130) // outbid-<a>-3 to bob, not stored
	if n, err := relay.PublishPending(context.Background()); err != nil || n != 1 || w.sent != 1 {
		t.Fatalf("marked %d rows (%v), sent %d; want 1 marked and sent", n, err, w.sent)
	}
	var pending int
	if err := p.db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Fatalf("%d outbox rows left unpublished", pending)
	}
}
