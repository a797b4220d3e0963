package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/shopspring/decimal"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/testdb"
	"bidgate/internal/testport"
	"bidgate/persist/kafka"
)

// A running node's Kafka gets validly signed bid-accepted messages that no
// relay wrote, as from someone who holds the event-signing key (the issue:
// every consumer that could verify could sign): one says seq 2 of a hot
// auction with one bid is bidder 666 at 1600, before anyone bid again.
// Then user 44 bids 1700. PostgreSQL ends with 44's bid at seq 2, and the
// node's /metrics counts the conflict. Messages signed with the cluster
// secret's HMAC (the old scheme) or another key are rejected.
func TestForgedBidMessageMeetsTheRedisLog(t *testing.T) {
	db, dbURL := testdb.New(t, 4)
	keyPath, key := devKey(t)
	kafkaPort := testport.Free(t)
	args, base := serveArgs(t, dbURL, keyPath, "--kafka-embedded-port", strconv.Itoa(kafkaPort))
	p := startProcess(t, args...)
	metricsURL := "http://" + logValue(t, p.await(t, "bidgate serving", 60*time.Second), "admin") + "/metrics"

	status, a := call(t, "POST", base+"/auctions", map[string]any{"title": "forged", "startPrice": "1000", "minIncrement": "100",
		"endTime": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "hot": true}, bearer(t, key, 1, auth.ScopeSell)...)
	if status != 201 {
		t.Fatalf("create: %d %v", status, a)
	}
	id := int64(a["id"].(float64))
	bid := func(user int64, amount string) {
		t.Helper()
		status, b := call(t, "POST", fmt.Sprintf("%s/auctions/%d/bids", base, id), map[string]any{"amount": amount},
			append([]string{"Idempotency-Key", uuid.NewString()}, bearer(t, key, user, auth.ScopeBid)...)...)
		if status != 201 {
			t.Fatalf("bid %s by %d: %d %v", amount, user, status, b)
		}
	}
	bid(43, "1500")
	eventually(t, 30*time.Second, "the first bid in PostgreSQL", func() error { return rowAt(t, db, id, 1, nil) })

	forged := bidgate.BidAccepted{AuctionID: id, BidderID: 666, Amount: "1600.00", RequestID: uuid.NewString(), Seq: 2,
		AcceptedAt: time.Now().UTC(), EndTime: time.Now().Add(time.Hour).UTC()}
	produceForged(t, fmt.Sprintf("127.0.0.1:%d", kafkaPort), forged)
	eventually(t, 30*time.Second, "the conflict counted on /metrics", func() error {
		return metricAtLeast(metricsURL, "bidgate_persister_conflicts_total", 1)
	})
	eventually(t, 30*time.Second, "the old-scheme and wrongly signed messages rejected", func() error {
		return metricAtLeast(metricsURL, "bidgate_persister_rejected_messages_total", 2)
	})

	bid(44, "1700")
	want := func(b bidgate.BidAccepted) error {
		if b.BidderID != 44 || b.Amount != "1700.00" {
			return fmt.Errorf("seq 2 is %d at %s, want 44 at 1700.00", b.BidderID, b.Amount)
		}
		return nil
	}
	eventually(t, 30*time.Second, "the real seq 2 in PostgreSQL", func() error { return rowAt(t, db, id, 2, want) })
	var forgedRows int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM bid WHERE bidder_id = 666`).Scan(&forgedRows); err != nil || forgedRows != 0 {
		t.Fatalf("%d forged rows (%v)", forgedRows, err)
	}
}

// produceForged writes the bid three times to the broker: signed with the
// cluster's own event-signing key (the tests' key, which the forger holds),
// with an HMAC under the cluster secret, and with another Ed25519 key.
func produceForged(t *testing.T, broker string, b bidgate.BidAccepted) {
	t.Helper()
	v, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	msg := func() kafkago.Message {
		return kafkago.Message{Key: []byte(strconv.FormatInt(b.AuctionID, 10)), Value: v}
	}
	leaked, err := kafka.ParseSigningKey(testEventKey)
	if err != nil {
		t.Fatal(err)
	}
	other, err := kafka.ParseSigningKey("YW5vdGhlciBrZXksIG5vdCB0aGUgY2x1c3RlcidzISE=")
	if err != nil {
		t.Fatal(err)
	}
	signed, hmacSigned, otherSigned := msg(), msg(), msg()
	leaked.Sign(&signed, bidgate.TopicBidAccepted)
	other.Sign(&otherSigned, bidgate.TopicBidAccepted)
	mac := hmac.New(sha256.New, []byte(clusterArgs[3]))
	mac.Write([]byte(bidgate.TopicBidAccepted + "\x00" + string(hmacSigned.Key) + "\x00"))
	mac.Write(v)
	hmacSigned.Headers = []kafkago.Header{{Key: "bidgate-signature", Value: []byte(hex.EncodeToString(mac.Sum(nil)))}}

	w := kafka.NewWriter([]string{broker}, bidgate.TopicBidAccepted, kafka.Security{})
	defer func() {
		if err := w.Close(); err != nil {
			t.Errorf("close the writer: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, hmacSigned, otherSigned, signed); err != nil {
		t.Fatal(err)
	}
}

// rowAt says why the bid table has no row at the auction's seq that check
// accepts (nil: any row).
func rowAt(t *testing.T, db *pgxpool.Pool, auction, seq int64, check func(bidgate.BidAccepted) error) error {
	t.Helper()
	var b bidgate.BidAccepted
	var amount decimal.Decimal
	err := db.QueryRow(context.Background(), `SELECT bidder_id, amount FROM bid WHERE auction_id = $1 AND seq = $2`, auction, seq).
		Scan(&b.BidderID, &amount)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("no row at seq %d", seq)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.Amount = bidgate.FormatMoney(amount)
	if check == nil {
		return nil
	}
	return check(b)
}

// metricAtLeast says why the sum of the series named name on the metrics
// page at url is below least.
func metricAtLeast(url, name string, least float64) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if sum < least {
		return fmt.Errorf("%s = %v, want at least %v", name, sum, least)
	}
	return nil
}
