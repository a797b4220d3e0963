package kafka

import (
	"crypto/tls"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Security is how bidgate authenticates to Kafka and protects the
// connection: TLS (nil: plaintext) and a SASL mechanism (nil: none). The
// zero value is a plaintext, unauthenticated connection, as to the embedded
// broker.
type Security struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// SASLConfig names a SASL mechanism and its credentials, as flags give
// them.
type SASLConfig struct {
	Mechanism string // "", PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	Username  string
	Password  string
}

// NewSecurity is TLS (nil: plaintext) with the SASL mechanism c names.
func NewSecurity(tlsConfig *tls.Config, c SASLConfig) (Security, error) {
	s := Security{TLS: tlsConfig}
	var err error
	switch c.Mechanism {
	case "":
		if c.Username != "" {
			return s, fmt.Errorf("a Kafka SASL user needs a SASL mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
	case "PLAIN":
		s.SASL = plain.Mechanism{Username: c.Username, Password: c.Password}
	case "SCRAM-SHA-256":
		s.SASL, err = scram.Mechanism(scram.SHA256, c.Username, c.Password)
	case "SCRAM-SHA-512":
		s.SASL, err = scram.Mechanism(scram.SHA512, c.Username, c.Password)
	default:
		return s, fmt.Errorf("unknown Kafka SASL mechanism %q (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", c.Mechanism)
	}
	if err != nil {
		return s, fmt.Errorf("kafka SASL: %w", err)
	}
	if s.SASL != nil && c.Username == "" {
		return s, fmt.Errorf("kafka SASL %s needs a user name", c.Mechanism)
	}
	return s, nil
}

func (s Security) dialer() *kafkago.Dialer {
	return &kafkago.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: s.TLS, SASLMechanism: s.SASL}
}

func (s Security) transport() *kafkago.Transport {
	return &kafkago.Transport{TLS: s.TLS, SASL: s.SASL, DialTimeout: 10 * time.Second}
}
