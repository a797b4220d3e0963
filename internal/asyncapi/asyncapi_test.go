package asyncapi

import (
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"bidgate"
	pkafka "bidgate/persist/kafka"
)

// TestDocumentLoads: the document parses, every reference resolves, every
// schema compiles and every example validates; each topic bidgate produces
// is a channel, and info.version is set.
func TestDocumentLoads(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Version == "" {
		t.Fatal("no info.version")
	}
	for _, topic := range bidgate.Topics {
		ms, err := c.Channel(topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Key == nil || m.Headers == nil {
				t.Fatalf("topic %s, message %s: no key or header schema", topic, m.Name)
			}
		}
	}
	if _, err := c.Channel(WebSocketChannel); err != nil {
		t.Fatal(err)
	}
	t.Logf("version %s, messages %v", c.Version, c.Messages())
}

// signed is a message of topic as a relay sends it, signed with a test key.
func signed(t *testing.T, topic, key, value string) kafka.Message {
	t.Helper()
	s, err := pkafka.ParseSigningKey("dGhlIHJlbGF5cycgZXZlbnQtc2lnbmluZyBrZXkhISE=")
	if err != nil {
		t.Fatal(err)
	}
	m := kafka.Message{Topic: topic, Key: []byte(key), Value: []byte(value)}
	s.Sign(&m, topic)
	return m
}

// TestKafkaMessages: what a consumer may rely on, and what must fail: an
// undocumented or missing field, a number for money, a leading zero, a
// winner below the reserve, a bad key, a missing or extra header.
func TestKafkaMessages(t *testing.T) {
	const (
		closed    = `{"auctionId":1,"winnerId":42,"finalPrice":"1250.00","closedAt":"2026-01-02T03:04:05.678901Z","bidCount":17}`
		cancelled = `{"auctionId":3,"sellerId":7,"cancelledAt":"2026-01-02T03:10:00.5Z"}`
		bid       = `{"auctionId":1,"bidderId":101,"amount":"1010.00","kind":"proxy","maxAmount":"1500.00","requestId":"0f8b6f7e-3b8c-4c1e-9a53-2f1d8f0b6a41","seq":1,"acceptedAt":"2026-01-02T03:04:05.678901Z","endTime":"2026-01-02T04:00:00Z","streamId":"1767323045678-0"}`
	)
	tests := []struct {
		name   string
		m      kafka.Message
		wantOK bool
	}{
		{"auction-closed", signed(t, bidgate.TopicAuctionClosed, "1", closed), true},
		{"auction-closed, nobody bid", signed(t, bidgate.TopicAuctionClosed, "1", `{"auctionId":1,"winnerId":null,"finalPrice":"100.00","closedAt":"2026-01-02T03:04:05Z","bidCount":0}`), true},
		{"auction-closed, reserve met", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `}`, `,"reserveMet":true}`, 1)), true},
		{"auction-closed, below the reserve", signed(t, bidgate.TopicAuctionClosed, "1", `{"auctionId":1,"winnerId":null,"finalPrice":"150.00","closedAt":"2026-01-02T03:04:05Z","bidCount":2,"reserveMet":false}`), true},
		{"auction-cancelled", signed(t, bidgate.TopicAuctionCancelled, "3", cancelled), true},
		{"bid-accepted, proxy", signed(t, bidgate.TopicBidAccepted, "1", bid), true},
		{"bid-accepted, from before proxy bids", signed(t, bidgate.TopicBidAccepted, "1", strings.Replace(bid, `"kind":"proxy","maxAmount":"1500.00",`, ``, 1)), true},

		{"undocumented field", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `}`, `,"reservePrice":"180.00"}`, 1)), false},
		{"missing field", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `,"bidCount":17`, ``, 1)), false},
		{"money as a number", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `"1250.00"`, `1250.00`, 1)), false},
		{"money with a leading zero", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `"1250.00"`, `"01250.00"`, 1)), false},
		{"id as a string", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `"winnerId":42`, `"winnerId":"42"`, 1)), false},
		{"id beyond int64", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `"winnerId":42`, `"winnerId":9223372036854775808`, 1)), false},
		{"time not RFC 3339", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `2026-01-02T03:04:05.678901Z`, `2026-01-02 03:04:05`, 1)), false},
		{"a winner below the reserve", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `}`, `,"reserveMet":false}`, 1)), false},
		{"member named twice", signed(t, bidgate.TopicAuctionClosed, "1", strings.Replace(closed, `"bidCount":17`, `"bidCount":17,"bidCount":18`, 1)), false},
		{"a proxy row without its maximum", signed(t, bidgate.TopicBidAccepted, "1", strings.Replace(bid, `"maxAmount":"1500.00",`, ``, 1)), false},
		{"a straight row with a maximum", signed(t, bidgate.TopicBidAccepted, "1", strings.Replace(bid, `"kind":"proxy"`, `"kind":"straight"`, 1)), false},
		{"unknown kind", signed(t, bidgate.TopicBidAccepted, "1", strings.Replace(bid, `"kind":"proxy"`, `"kind":"sniper"`, 1)), false},
		{"key with a leading zero", signed(t, bidgate.TopicAuctionClosed, "01", closed), false},
		{"empty key", signed(t, bidgate.TopicAuctionClosed, "", closed), false},
		{"unknown topic", signed(t, "auction-opened", "1", closed), false},
		{"a cancel on the closed topic", signed(t, bidgate.TopicAuctionClosed, "3", cancelled), false},
		{"unsigned", kafka.Message{Topic: bidgate.TopicAuctionClosed, Key: []byte("1"), Value: []byte(closed)}, false},
		{"the old HMAC header as well", func() kafka.Message {
			m := signed(t, bidgate.TopicAuctionClosed, "1", closed)
			m.Headers = append(m.Headers, kafka.Header{Key: "bidgate-signature", Value: []byte("00ff")})
			return m
		}(), false},
		{"the signature header twice", func() kafka.Message {
			m := signed(t, bidgate.TopicAuctionClosed, "1", closed)
			m.Headers = append(m.Headers, m.Headers[0])
			return m
		}(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateKafka(tc.m)
			if tc.wantOK && err != nil {
				t.Fatal(err)
			}
			if !tc.wantOK && err == nil {
				t.Fatalf("%s %s accepted", tc.m.Key, tc.m.Value)
			}
			t.Log(err)
		})
	}
}

// TestKafkaUnsigned: an insecure relay's message has no header at all.
func TestKafkaUnsigned(t *testing.T) {
	m := kafka.Message{Topic: bidgate.TopicAuctionCancelled, Key: []byte("3"),
		Value: []byte(`{"auctionId":3,"sellerId":7,"cancelledAt":"2026-01-02T03:10:00Z"}`)}
	if err := ValidateKafkaUnsigned(m); err != nil {
		t.Fatal(err)
	}
	m.Headers = []kafka.Header{{Key: pkafka.KeyIDHeader, Value: []byte("0011223344556677")}}
	if err := ValidateKafkaUnsigned(m); err == nil {
		t.Fatal("an unsigned message with a header accepted")
	}
}

// TestWebSocketFrames: each frame is exactly one of snapshot, update and
// closed; open and final states go in their own types only.
func TestWebSocketFrames(t *testing.T) {
	const snap = `{"type":"snapshot","auctionId":1,"currentPrice":"1250.00","leader":"Bidder 1","endTime":"2026-01-02T04:00:00Z","status":"OPEN","bidCount":1,"seq":1}`
	tests := []struct {
		name   string
		frame  string
		wantOK bool
	}{
		{"snapshot", snap, true},
		{"snapshot, nobody bid", strings.Replace(snap, `"leader":"Bidder 1"`, `"leader":null`, 1), true},
		{"snapshot naming the leader's id", strings.Replace(snap, `"leader":"Bidder 1"`, `"leaderId":42`, 1), false},
		{"a malformed alias", strings.Replace(snap, `"leader":"Bidder 1"`, `"leader":"42"`, 1), false},
		{"update with its time", strings.Replace(strings.Replace(snap, `"snapshot"`, `"update"`, 1), `}`, `,"updatedAt":"2026-01-02T03:30:00.123456Z"}`, 1), true},
		{"closed", strings.Replace(strings.Replace(snap, `"snapshot"`, `"closed"`, 1), `"OPEN"`, `"CLOSED"`, 1), true},
		{"cancelled", strings.Replace(strings.Replace(snap, `"snapshot"`, `"closed"`, 1), `"OPEN"`, `"CANCELLED"`, 1), true},

		{"undocumented field", strings.Replace(snap, `}`, `,"maxAmount":"2000.00"}`, 1), false},
		{"missing leader", strings.Replace(snap, `"leader":"Bidder 1",`, ``, 1), false},
		{"unknown type", strings.Replace(snap, `"snapshot"`, `"bid"`, 1), false},
		{"an update that is closed", strings.Replace(strings.Replace(snap, `"snapshot"`, `"update"`, 1), `"OPEN"`, `"CLOSED"`, 1), false},
		{"a closed message that is open", strings.Replace(snap, `"snapshot"`, `"closed"`, 1), false},
		{"price as a number", strings.Replace(snap, `"1250.00"`, `1250`, 1), false},
		{"not JSON", `snapshot`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateWebSocket([]byte(tc.frame))
			if tc.wantOK && err != nil {
				t.Fatal(err)
			}
			if !tc.wantOK && err == nil {
				t.Fatalf("%s accepted", tc.frame)
			}
		})
	}
}

// TestMoneyPatternIsParseMoneys: the schemas' money pattern accepts exactly
// what bidgate.ParseMoney accepts, so the contract and the code read
// amounts alike.
func TestMoneyPatternIsParseMoneys(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	closedMsg, err := c.Message("auctionClosed")
	if err != nil {
		t.Fatal(err)
	}
	for _, amount := range []string{"0", "0.5", "0.50", "1", "1250", "1250.5", "1250.00", "999999999999999.99",
		"", "00", "01", "05000", "00.5", "1.", ".5", "1.234", "-1", "+1", "1e3", " 1", "1 ", "1,00", "9999999999999999", "１"} {
		_, parseErr := bidgate.ParseMoney(amount)
		v := `{"auctionId":1,"winnerId":null,"finalPrice":"` + amount + `","closedAt":"2026-01-02T03:04:05Z","bidCount":0}`
		schemaErr := closedMsg.ValidatePayload([]byte(v))
		if (parseErr == nil) != (schemaErr == nil) {
			t.Errorf("%q: ParseMoney says %v, the schema %v", amount, parseErr, schemaErr)
		}
	}
}
