package kafka

import (
	"encoding/base64"
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
		{"a size past any batch", setHeader(msgs[2], BatchProofHeader, strings.Replace(proof, "/5/", "/9223372036854775807/", 1))},
		{"the largest size with a path as long", setHeader(msgs[2], BatchProofHeader, "2/1073741824/"+base64.StdEncoding.EncodeToString(make([]byte, 30*32)))},
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
		if v.Verify(c.m) || v.Fetch().Verify(c.m) {
			t.Errorf("%s: verified", c.name)
		}
		// A fetch that proved every node of the batch refuses it too.
		f := v.Fetch()
		for _, m := range msgs {
			if !f.Verify(m) {
				t.Fatal("the untouched batch does not verify in a fetch")
			}
		}
		if f.Verify(c.m) {
			t.Errorf("%s: verified in a fetch of its batch", c.name)
		}
	}
}

// A fetch verifies what Verify does, message by message, in any order and
// with tampered messages anywhere: before, among and after the messages
// whose paths it proved.
func TestFetchVerifiesAsVerify(t *testing.T) {
	s := testSigner(t, "the batch event-signing key here"[:32])
	v, err := NewVerifier(s.Public())
	if err != nil {
		t.Fatal(err)
	}
	tamper := func(m kafkago.Message) kafkago.Message { m.Value = []byte(`{"seq":-1}`); return m }
	for _, n := range []int{2, 3, 5, 13, 119, 1000} {
		for _, c := range []struct {
			name     string
			order    func(i int) int // the i-th message fetched
			tampered func(i int) bool
		}{
			{"in order", func(i int) int { return i }, func(int) bool { return false }},
			{"backwards", func(i int) int { return n - 1 - i }, func(int) bool { return false }},
			{"every third tampered", func(i int) int { return i }, func(i int) bool { return i%3 == 0 }},
			{"the last tampered", func(i int) int { return i }, func(i int) bool { return i == n-1 }},
			{"the first tampered, backwards", func(i int) int { return n - 1 - i }, func(i int) bool { return i == 0 }},
			{"the odd ones, each twice", func(i int) int { return (i/2)*2 | 1 }, func(int) bool { return false }},
		} {
			msgs := batch(s, n)
			f := v.Fetch()
			for i := range n {
				at := c.order(i)
				if at >= n {
					continue
				}
				m := msgs[at]
				if c.tampered(at) {
					m = tamper(m)
				}
				if got, want := f.Verify(m), v.Verify(m); got != want || got == c.tampered(at) {
					t.Errorf("batch of %d, %s: message %d verified %v in a fetch, %v alone", n, c.name, at, got, want)
				}
			}
		}
	}
}

// A nil verifier's fetch accepts every message, as the verifier does.
func TestNilVerifierFetch(t *testing.T) {
	var v *Verifier
	if !v.Fetch().Verify(kafkago.Message{Value: []byte("unsigned")}) {
		t.Error("a nil verifier's fetch refused a message")
	}
}

// What one message of a relay's batch costs to verify, alone and in a
// fetch of the whole batch (the root verified before, as for every
// message of a batch but its first).
func BenchmarkVerifyBatchMessage(b *testing.B) {
	s := testSigner(b, "the batch event-signing key here"[:32])
	v, err := NewVerifier(s.Public())
	if err != nil {
		b.Fatal(err)
	}
	msgs := batch(s, 119)
	b.Run("alone", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if !v.Verify(msgs[i%len(msgs)]) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("fetch", func(b *testing.B) {
		var f *Fetch
		for i := 0; b.Loop(); i++ {
			if i%len(msgs) == 0 {
				f = v.Fetch()
			}
			if !f.Verify(msgs[i%len(msgs)]) {
				b.Fatal("refused")
			}
		}
	})
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
