package kafka

import (
	"bidgate"
	"context"
	"crypto/tls"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"bidgate/internal/testcert"
)

// bidgate reaches a broker that wants TLS and SASL (SCRAM-SHA-512 and
// PLAIN): topics, a produce and a consumer-group read. Wrong credentials,
// an untrusted certificate or plaintext get nothing through.
func TestKafkaTLSAndSASL(t *testing.T) {
	cert := testcert.New(t)
	ca := &tls.Config{RootCAs: cert.Roots, MinVersion: tls.VersionTLS12}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "bidgate", "scram secret"), kfake.Superuser("PLAIN", "plainuser", "plain secret"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()

	for _, tc := range []struct {
		name string
		tls  *tls.Config
		sasl SASLConfig
	}{
		{"SCRAM-SHA-512", ca, SASLConfig{"SCRAM-SHA-512", "bidgate", "scram secret"}},
		{"PLAIN", ca, SASLConfig{"PLAIN", "plainuser", "plain secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := NewSecurity(tc.tls, tc.sasl)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := EnsureTopics(ctx, addrs, sec, 2, 1); err != nil {
				t.Fatal(err)
			}
			w := NewWriter(addrs, bidgate.TopicBidAccepted, sec)
			defer w.Close()
			if err := w.WriteMessages(ctx, kafkago.Message{Key: []byte("1"), Value: []byte(tc.name)}); err != nil {
				t.Fatal(err)
			}
			r := NewReader(addrs, bidgate.TopicBidAccepted, "group-"+tc.name, sec)
			defer r.Close()
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if string(m.Value) == tc.name {
					break
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		tls  *tls.Config
		sasl SASLConfig
	}{
		{"wrong password", ca, SASLConfig{"SCRAM-SHA-512", "bidgate", "guess"}},
		{"no SASL", ca, SASLConfig{}},
		{"untrusted certificate", &tls.Config{MinVersion: tls.VersionTLS12}, SASLConfig{"SCRAM-SHA-512", "bidgate", "scram secret"}},
		{"plaintext", nil, SASLConfig{"SCRAM-SHA-512", "bidgate", "scram secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := NewSecurity(tc.tls, tc.sasl)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			w := NewWriter(addrs, bidgate.TopicBidAccepted, sec)
			defer w.Close()
			if err := w.WriteMessages(ctx, kafkago.Message{Key: []byte("1"), Value: []byte("refused")}); err == nil {
				t.Fatal("produced with " + tc.name)
			}
		})
	}
}

func TestNewSecurityRefusesBadSettings(t *testing.T) {
	for _, c := range []SASLConfig{
		{Mechanism: "GSSAPI", Username: "u"},
		{Mechanism: "PLAIN"},
		{Username: "u"},
	} {
		if _, err := NewSecurity(nil, c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
