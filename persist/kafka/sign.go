package kafka

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	kafkago "github.com/segmentio/kafka-go"
)

// SignatureHeader carries a message's HMAC-SHA256, hex, under the cluster
// secret, over its topic, key and value: a consumer that holds the secret
// knows a bidgate relay wrote it, for this topic and this auction.
const SignatureHeader = "bidgate-signature"

// Sign adds the signature header to m, whose Topic must be set as it will
// be produced. An empty secret (an insecure cluster) signs nothing.
func Sign(secret []byte, m *kafkago.Message, topic string) {
	if len(secret) == 0 {
		return
	}
	m.Headers = append(m.Headers, kafkago.Header{Key: SignatureHeader, Value: []byte(signature(secret, topic, m.Key, m.Value))})
}

// Verify reports whether m carries a valid signature; with an empty secret
// every message passes.
func Verify(secret []byte, m kafkago.Message) bool {
	if len(secret) == 0 {
		return true
	}
	for _, h := range m.Headers {
		if h.Key == SignatureHeader {
			return hmac.Equal(h.Value, []byte(signature(secret, m.Topic, m.Key, m.Value)))
		}
	}
	return false
}

func signature(secret []byte, topic string, key, value []byte) string {
	mac := hmac.New(sha256.New, secret)
	for _, part := range [][]byte{[]byte(topic), key} {
		mac.Write(part)
		mac.Write([]byte{0})
	}
	mac.Write(value)
	return hex.EncodeToString(mac.Sum(nil))
}
