package kafka

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"bidgate"
	"bidgate/internal/testenv"
)

func TestEmbeddedBrokerRoundTrip(t *testing.T) {
	e, err := StartEmbedded(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, e.Addrs(), Security{}, 4, 1); err != nil {
		t.Fatal(err)
	}

	w := NewWriter(e.Addrs(), bidgate.TopicBidAccepted, Security{})
	defer w.Close()
	msgs := make([]kafka.Message, 1000)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	r := NewReader(e.Addrs(), bidgate.TopicBidAccepted, "test", Security{})
	defer r.Close()
	last := map[string]int{} // per key, values must rise: order is kept
	for range msgs {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var v int
		if _, err := fmt.Sscan(string(m.Value), &v); err != nil {
			t.Fatalf("message %q: %v", m.Value, err)
		}
		if prev, ok := last[string(m.Key)]; ok && v <= prev {
			t.Fatalf("key %s: %d after %d", m.Key, v, prev)
		}
		last[string(m.Key)] = v
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	// A third-party client reads the same topic.
	kcat := testenv.Need(t, "kcat")
	out, err := exec.CommandContext(ctx, kcat, "-C", "-b", e.Addrs()[0], "-t", bidgate.TopicBidAccepted, "-e", "-q", "-f", "%s\n").Output()
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	if n := len(strings.Fields(string(out))); n != len(msgs) {
		t.Fatalf("kcat read %d messages, want %d", n, len(msgs))
	}
}

// BenchmarkWriteFewMessages is a relay's pass at moderate rates: a few
// messages over every partition. Its B/op is what each pass allocates.
func BenchmarkWriteFewMessages(b *testing.B) {
	const partitions = 8
	e, err := StartEmbedded(0, partitions)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	if err := EnsureTopics(ctx, e.Addrs(), Security{}, partitions, 1); err != nil {
		b.Fatal(err)
	}
	w := NewWriter(e.Addrs(), bidgate.TopicBidNotifications, Security{})
	defer w.Close()
	msgs := make([]kafka.Message, 2*partitions)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprint(i)), Value: []byte(`{"id":"outbid-1-2"}`)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	}
}
