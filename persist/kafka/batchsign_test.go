package kafka

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	kafkago "github.com/segmentio/kafka-go"
)

// batch is n messages of topic bid-accepted signed together by s.
func batch(s *Signer, n int) []kafkago.Message {
	msgs := make([]kafkago.Message, n)
	for i := range msgs {
		msgs[i] = kafkago.Message{Topic: "bid-accepted", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf(`{"seq":%d}`, i))}
	}
	s.SignBatch(msgs, "bid-accepted")
	return msgs
}

// header returns m's header named key.
func header(m kafkago.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// setHeader replaces m's header named key.
func setHeader(m kafkago.Message, key, value string) kafkago.Message {
	hs := make([]kafkago.Header, 0, len(m.Headers))
	for _, h := range m.Headers {
		if h.Key == key {
			h.Value = []byte(value)
		}
		hs = append(hs, h)
	}
	m.Headers = hs
	return m
}

// Every message of a batch verifies on its own, whatever the batch's size
// (odd levels included), with a verifier that saw the batch's root before
// or not.
func TestBatchSignatures(t *testing.T) {
	s := testSigner(t, "the batch event-signing key here"[:32])
	for _, n := range []int{1, 2, 3, 5, 8, 13, 1000} {
		msgs := batch(s, n)
		shared, err := NewVerifier(s.Public())
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range msgs {
			fresh, err := NewVerifier(s.Public())
			if err != nil {
				t.Fatal(err)
			}
			if !fresh.Verify(m) || !shared.Verify(m) {
				t.Fatalf("batch of %d: message %d does not verify", n, i)
			}
		}
	}
}

// A batch signature proves its messages only: each change of a message or
// of its proof is refused, by a verifier that verified the batch's root
// already too.
func TestBatchSignatureRefusals(t *testing.T) {
	s, other := testSigner(t, "the batch event-signing key here"[:32]), testSigner(t, "another batch event-signing key!"[:32])
	msgs := batch(s, 5)
	proof := header(msgs[2], BatchProofHeader)
	cases := []struct {
		name string
		m    kafkago.Message
	}{
		{"another value", func() kafkago.Message { m := msgs[2]; m.Value = []byte(`{"seq":99}`); return m }()},
		{"another key", func() kafkago.Message { m := msgs[2]; m.Key = []byte("9"); return m }()},
		{"another topic", func() kafkago.Message { m := msgs[2]; m.Topic = "auction-closed"; return m }()},
		{"another message's proof", setHeader(msgs[2], BatchProofHeader, header(msgs[3], BatchProofHeader))},
		{"another index", setHeader(msgs[2], BatchProofHeader, "3"+proof[1:])},
		{"another size", setHeader(msgs[2], BatchProofHeader, strings.Replace(proof, "/5/", "/6/", 1))},
		{"index past the size", setHeader(msgs[2], BatchProofHeader, strings.Replace(proof, "2/", "7/", 1))},
		{"path cut short", setHeader(msgs[2], BatchProofHeader, proof[:len(proof)-8])},
		{"path not base64", setHeader(msgs[2], BatchProofHeader, "2/5/!!")},
		{"no path", setHeader(msgs[2], BatchProofHeader, "2/5")},
		{"signature of another batch", setHeader(msgs[2], BatchSignatureHeader, header(batch(s, 6)[2], BatchSignatureHeader))},
		{"signed by another key", setHeader(batch(other, 5)[2], KeyIDHeader, KeyID(s.Public()))},
		{"no signature", setHeader(msgs[2], BatchSignatureHeader, "")},
	}
	v, err := NewVerifier(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if !v.Verify(m) {
			t.Fatal("the untouched batch does not verify")
		}
	}
	for _, c := range cases {
		if v.Verify(c.m) {
			t.Errorf("%s: verified", c.name)
		}
	}
}

// One verifier checks batches from several goroutines at once.
func TestBatchSignaturesConcurrently(t *testing.T) {
	s := testSigner(t, "the batch event-signing key here"[:32])
	v, err := NewVerifier(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 20 {
				msgs := batch(s, 3+g+round)
				msgs[0].Value = []byte("tampered")
				for i, m := range msgs {
					if got := v.Verify(m); got != (i != 0) {
						t.Errorf("goroutine %d round %d message %d: verified %v", g, round, i, got)
					}
				}
			}
		})
	}
	wg.Wait()
}
