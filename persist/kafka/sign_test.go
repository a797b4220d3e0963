package kafka

import (
	"encoding/base64"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

func testSigner(t testing.TB, seed string) *Signer {
	t.Helper()
	s, err := ParseSigningKey(base64.StdEncoding.EncodeToString([]byte(seed)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A signature verifies with its key's public key only, for its topic, key
// and value only; a verifier of several keys (a rotation) takes each.
func TestSignatures(t *testing.T) {
	old, cur := testSigner(t, "the old event-signing key of ours"[:32]), testSigner(t, "the new event-signing key of ours"[:32])
	both, err := NewVerifier(old.Public(), cur.Public())
	if err != nil {
		t.Fatal(err)
	}
	onlyNew, err := NewVerifier(cur.Public())
	if err != nil {
		t.Fatal(err)
	}
	signed := func(s *Signer) kafkago.Message {
		m := kafkago.Message{Topic: "bid-accepted", Key: []byte("7"), Value: []byte(`{"auctionId":7}`)}
		s.Sign(&m, "bid-accepted")
		return m
	}
	cases := []struct {
		name string
		m    func() kafkago.Message
		v    *Verifier
		want bool
	}{
		{"signed, its key", func() kafkago.Message { return signed(cur) }, onlyNew, true},
		{"old key during the rotation", func() kafkago.Message { return signed(old) }, both, true},
		{"old key after it", func() kafkago.Message { return signed(old) }, onlyNew, false},
		{"unsigned", func() kafkago.Message { return kafkago.Message{Topic: "bid-accepted", Key: []byte("7")} }, onlyNew, false},
		{"another topic", func() kafkago.Message { m := signed(cur); m.Topic = "auction-closed"; return m }, onlyNew, false},
		{"another auction", func() kafkago.Message { m := signed(cur); m.Key = []byte("8"); return m }, onlyNew, false},
		{"another value", func() kafkago.Message { m := signed(cur); m.Value = []byte(`{"auctionId":8}`); return m }, onlyNew, false},
		{"key id of another key", func() kafkago.Message {
			m := signed(old)
			m.Headers[1].Value = []byte(KeyID(cur.Public()))
			return m
		}, onlyNew, false},
		{"signature not base64", func() kafkago.Message { m := signed(cur); m.Headers[0].Value = []byte("!!"); return m }, onlyNew, false},
		{"no verifier (insecure)", func() kafkago.Message { return kafkago.Message{} }, nil, true},
	}
	for _, c := range cases {
		if got := c.v.Verify(c.m()); got != c.want {
			t.Errorf("%s: verified %v, want %v", c.name, got, c.want)
		}
	}
	var none *Signer
	m := kafkago.Message{}
	none.Sign(&m, "bid-accepted")
	if len(m.Headers) != 0 {
		t.Fatal("a nil signer signed")
	}
}
