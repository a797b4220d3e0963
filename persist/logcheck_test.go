package persist_test

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/testmetrics"
	"bidgate/persist"
	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// eventKeys is the signing key of the 32 bytes of seed and a verifier of
// its public key alone: what a consumer holds.
func eventKeys(t testing.TB, seed string) (*kafka.Signer, *kafka.Verifier) {
	t.Helper()
	s, err := kafka.ParseSigningKey(base64.StdEncoding.EncodeToString([]byte(seed)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := kafka.NewVerifier(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

// hmacSign signs m as bidgate did before Ed25519: the hex HMAC-SHA256 under
// the cluster secret of topic, key and value, in header bidgate-signature.
func hmacSign(secret []byte, m *kafkago.Message) {
	mac := hmac.New(sha256.New, secret)
	for _, part := range [][]byte{[]byte(bidgate.TopicBidAccepted), m.Key} {
		mac.Write(part)
		mac.Write([]byte{0})
	}
	mac.Write(m.Value)
	m.Headers = append(m.Headers, kafkago.Header{Key: "bidgate-signature", Value: []byte(hex.EncodeToString(mac.Sum(nil)))})
}

// withPublicKeyAsSignature is the best a consumer can do: sign with what it
// holds, the public key (taken as a seed), naming the relays' key.
func withPublicKeyAsSignature(relays *kafka.Signer, m *kafkago.Message) {
	forger := ed25519.NewKeyFromSeed(relays.Public())
	sig := ed25519.Sign(forger, kafka.SignedBytes(bidgate.TopicBidAccepted, m.Key, m.Value))
	m.Headers = append(m.Headers,
		kafkago.Header{Key: kafka.SignatureHeader, Value: []byte(base64.StdEncoding.EncodeToString(sig))},
		kafkago.Header{Key: kafka.KeyIDHeader, Value: []byte(kafka.KeyID(relays.Public()))})
}

// forger produces validly signed bid-accepted messages: it holds the
// relays' key, as anyone who could read the old shared secret did.
type forger struct {
	t      testing.TB
	w      *kafkago.Writer
	signer *kafka.Signer
}

func (p *pipeline) forger(signer *kafka.Signer) *forger {
	w := kafka.NewWriter(p.broker.Addrs(), bidgate.TopicBidAccepted, kafka.Security{})
	p.closeAtEnd("writer", w.Close)
	return &forger{t: p.t, w: w, signer: signer}
}

func (f *forger) produce(bids ...bidgate.BidAccepted) {
	f.t.Helper()
	msgs := make([]kafkago.Message, len(bids))
	for i, b := range bids {
		v, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		msgs[i] = kafkago.Message{Key: []byte(strconv.FormatInt(b.AuctionID, 10)), Value: v}
		f.signer.Sign(&msgs[i], bidgate.TopicBidAccepted)
	}
	if err := f.w.WriteMessages(context.Background(), msgs...); err != nil {
		f.t.Fatal(err)
	}
}

// checkedPersister is a persister verifying with v, metrics on its own
// registry, announcing its batches.
func (p *pipeline) checkedPersister(v *kafka.Verifier) (*persist.Persister, *prometheus.Registry) {
	r := kafka.NewReader(p.broker.Addrs(), bidgate.TopicBidAccepted, "persister", kafka.Security{})
	p.closeAtEnd("reader", r.Close)
	reg := prometheus.NewRegistry()
	per := persist.NewPersister(p.db, p.rdb, r, persist.PersisterConfig{Verifier: v}, reg)
	p.announce(per)
	return per, reg
}

// auction creates a hot auction at 1000 rising by 100.
func (p *pipeline) auction() bidgate.Auction {
	p.t.Helper()
	a, err := p.shard.CreateAuction(context.Background(), bidgate.NewAuction{SellerID: 9_000_001, Title: "hot",
		StartPrice: decimal.NewFromInt(1000), MinIncrement: decimal.NewFromInt(100),
		EndTime: time.Now().Add(time.Hour), ExtendBy: time.Second, Hot: true})
	if err != nil {
		p.t.Fatal(err)
	}
	return a
}

// place has bidder bid amount on a, which must accept it.
func (p *pipeline) place(a bidgate.Auction, bidder, amount int64) bidgate.BidResult {
	p.t.Helper()
	res, err := p.shard.PlaceBid(context.Background(), bidgate.BidRequest{AuctionID: a.ID, BidderID: bidder,
		Amount: decimal.NewFromInt(amount), RequestID: uuid.New()})
	if err != nil {
		p.t.Fatalf("bid %d by %d: %v", amount, bidder, err)
	}
	return res
}

// row is the bid table's row of one seq.
type row struct {
	bidder    int64
	amount    decimal.Decimal
	requestID uuid.UUID
}

// rowsAt returns the rows of the auction's seq (more than one would be a bug).
func (p *pipeline) rowsAt(auction, seq int64) []row {
	p.t.Helper()
	rows, err := p.db.Query(context.Background(), `SELECT bidder_id, amount, request_id FROM bid WHERE auction_id = $1 AND seq = $2`, auction, seq)
	if err != nil {
		p.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.bidder, &x.amount, &x.requestID)
		return x, err
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// logEntry is the Redis log's entry of the auction's seq.
func (p *pipeline) logEntry(auction, seq int64) bidgate.BidAccepted {
	p.t.Helper()
	bids, err := redisstore.New(p.rdb).ReadLog(context.Background(), auction, seq-1)
	if err != nil || len(bids) == 0 || bids[0].Seq != seq {
		p.t.Fatalf("log entry %d of auction %d: %v, %v", seq, auction, bids, err)
	}
	return bids[0]
}

// forgedFrom is entry with another bidder and amount under a new request
// id, as a forger who read the topic writes it.
func forgedFrom(entry bidgate.BidAccepted, bidder int64, amount string) bidgate.BidAccepted {
	f := entry
	f.BidderID, f.Amount, f.RequestID = bidder, amount, uuid.NewString()
	return f
}

// A validly signed message for a seq the Redis log holds, that says another
// bid, is refused and counted, and the log's entry is written instead; the
// real message for that seq, later, changes nothing. The forger may name
// the entry's id or any other.
func TestPersisterWritesTheLogNotAConflictingMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		hint func(real string) string
	}{
		{"the entry's id", func(real string) string { return real }},
		{"another id", func(string) string { return "1-0" }},
		{"no id", func(string) string { return "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPipeline(t)
			signer, verifier := eventKeys(t, "the relays' event-signing key!!!")
			a := p.auction()
			p.place(a, 43, 1500)
			real := p.place(a, 44, 1700)
			entry := p.logEntry(a.ID, 2)
			forged := forgedFrom(entry, 666, "1600.00")
			forged.StreamID = c.hint(entry.StreamID)

			persister, reg := p.checkedPersister(verifier)
			p.run(persister.Run)
			p.forger(signer).produce(forged)
			waitFor(t, 30*time.Second, "the forged message refused", p.wrote, func() (float64, bool) {
				n := testmetrics.Value(t, reg, "bidgate_persister_conflicts_total")
				return n, n >= 1
			})
			if got := p.rowsAt(a.ID, 2); len(got) != 1 || got[0].bidder != 44 || !got[0].amount.Equal(decimal.NewFromInt(1700)) ||
				got[0].requestID != real.Bid.RequestID {
				t.Fatalf("seq 2 in PostgreSQL: %+v; want the log's bid, 1700 by 44", got)
			}
			if n := testmetrics.Value(t, reg, "bidgate_persister_conflicts_total", "reason", "log"); n != 1 {
				t.Fatalf("conflicts (log) %v, want 1", n)
			}

			// The relay's real messages, seq 1 and 2: seq 2 is there already.
			relay := persist.NewRelay(p.db, p.rdb, p.forger(signer).w, persist.RelayConfig{Signer: signer}, prometheus.NewRegistry())
			if n, err := relay.RelayOnce(context.Background()); err != nil || n != 2 {
				t.Fatalf("relayed %d, %v", n, err)
			}
			p.waitForBids(a.ID, 2)
			waitFor(t, 30*time.Second, "the real messages persisted", p.wrote, func() (float64, bool) {
				n := testmetrics.Value(t, reg, "bidgate_persister_bids_total")
				return n, n >= 3 // the log's entry, then both real ones
			})
			if got := p.rowsAt(a.ID, 2); len(got) != 1 || got[0].requestID != real.Bid.RequestID {
				t.Fatalf("seq 2 after the real message: %+v", got)
			}
			if n := testmetrics.Value(t, reg, "bidgate_persister_conflicts_total"); n != 1 {
				t.Fatalf("conflicts %v after the real messages, want still 1", n)
			}
		})
	}
}

// The case: a hot auction with one bid; a validly signed message
// says seq 2 is bidder 666 at 1600 before any seq 2 exists; then user 44
// bids 1700 and gets seq 2. PostgreSQL ends with 44's bid at seq 2, the
// message is counted as a conflict, and the log is trimmed past rows that
// match it only.
func TestForgedNextSeqDoesNotReplaceTheRealBid(t *testing.T) {
	p := newPipeline(t)
	signer, verifier := eventKeys(t, "the relays' event-signing key!!!")
	a := p.auction()
	persister, reg := p.checkedPersister(verifier)
	p.run(persister.Run)
	p.run(persist.NewRelay(p.db, p.rdb, p.forger(signer).w, persist.RelayConfig{Signer: signer}, prometheus.NewRegistry()).Run)

	first := p.place(a, 43, 1500)
	p.waitForBids(a.ID, 1)
	forged := forgedFrom(p.logEntry(a.ID, 1), 666, "1600.00")
	forged.Seq = 2
	p.forger(signer).produce(forged)
	waitFor(t, 30*time.Second, "the forged message refused", p.wrote, func() (float64, bool) {
		n := testmetrics.Value(t, reg, "bidgate_persister_conflicts_total", "reason", "no_bid")
		return n, n >= 1
	})

	real := p.place(a, 44, 1700)
	if real.Bid.Seq != 2 {
		t.Fatalf("the real bid got seq %d, want 2", real.Bid.Seq)
	}
	ids := p.waitForBids(a.ID, 2)
	if len(ids) != 2 || !ids[first.Bid.RequestID] || !ids[real.Bid.RequestID] {
		t.Fatalf("bids in PostgreSQL %v, want the two real ones", ids)
	}
	if got := p.rowsAt(a.ID, 2); len(got) != 1 || got[0].bidder != 44 || !got[0].amount.Equal(decimal.NewFromInt(1700)) {
		t.Fatalf("seq 2 in PostgreSQL: %+v; want 1700 by user 44", got)
	}
	if n := p.bidRows(`bidder_id = 666`); n != 0 {
		t.Fatalf("%d forged rows written", n)
	}
	rec := persist.NewReconciler(p.db, p.rdb, persist.ReconcilerConfig{}, prometheus.NewRegistry())
	if res, err := rec.ReconcileOnce(context.Background()); err != nil || res.Unpersisted != 0 || res.Conflicting != 0 {
		t.Fatalf("reconciler: %+v, %v", res, err)
	}
	if n := testmetrics.Value(t, reg, "bidgate_persister_conflicts_total"); n != 1 {
		t.Fatalf("conflicts %v, want 1", n)
	}
}

// A row that is not the log's entry of its seq (written before the check,
// or by hand) keeps the log from being trimmed past it, and the reconciler
// counts it; the rows before it are trimmed.
func TestReconcilerTrimsOnlyPastMatchingRows(t *testing.T) {
	p := newPipeline(t)
	a := p.auction()
	p.place(a, 43, 1500)
	p.place(a, 44, 1700)
	p.place(a, 45, 1800)
	forged := forgedFrom(p.logEntry(a.ID, 2), 666, "1600.00")
	err := pgx.BeginFunc(context.Background(), p.db, func(tx pgx.Tx) error {
		_, err := pgstore.WriteHotBids(context.Background(), tx, []bidgate.BidAccepted{p.logEntry(a.ID, 1), forged, p.logEntry(a.ID, 3)}, pgstore.StoreOutbidNotices)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rec := persist.NewReconciler(p.db, p.rdb, persist.ReconcilerConfig{}, reg)
	for range 2 { // the second pass sees the first's trim
		res, err := rec.ReconcileOnce(context.Background())
		if err != nil || res.Conflicting != 1 {
			t.Fatalf("reconciler: %+v, %v; want one conflicting bid", res, err)
		}
	}
	if n := testmetrics.Value(t, reg, "bidgate_reconciler_conflicting_bids"); n != 1 {
		t.Fatalf("bidgate_reconciler_conflicting_bids %v, want 1", n)
	}
	left, err := redisstore.New(p.rdb).ReadLog(context.Background(), a.ID, 0)
	if err != nil || len(left) != 2 || left[0].Seq != 2 {
		t.Fatalf("log after trimming: %+v, %v; want seq 2 and 3 kept", left, err)
	}
}

// When Redis holds nothing of the auction (its data lost), a message is the
// only copy and is written as before, but never over a row that holds its
// seq: a second, different message for that seq is a conflict.
func TestPersisterWithoutTheLogNeverOverwrites(t *testing.T) {
	p := newPipeline(t)
	signer, verifier := eventKeys(t, "the relays' event-signing key!!!")
	a := p.auction()
	p.place(a, 43, 1500)
	entry := p.logEntry(a.ID, 1)
	k := redisstore.KeysOf(a.ID)
	if err := p.rdb.Del(context.Background(), k.State, k.Reqs, k.Log, k.Relayed, k.Persisted).Err(); err != nil {
		t.Fatal(err)
	}
	persister, reg := p.checkedPersister(verifier)
	p.run(persister.Run)
	f := p.forger(signer)
	f.produce(entry)
	p.waitForBids(a.ID, 1)
	f.produce(forgedFrom(entry, 666, "1600.00"), entry)
	waitFor(t, 30*time.Second, "the second message refused", p.wrote, func() (float64, bool) {
		n := testmetrics.Value(t, reg, "bidgate_persister_conflicts_total", "reason", "row")
		return n, n >= 1
	})
	if got := p.rowsAt(a.ID, 1); len(got) != 1 || got[0].bidder != 43 {
		t.Fatalf("seq 1: %+v; want the first message's bid alone", got)
	}
}
