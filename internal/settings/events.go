package settings

import (
	"crypto/ed25519"
	"fmt"
	"strings"

	"bidgate/persist/kafka"
)

// Events is how a node signs and verifies the Kafka messages bidgate
// produces: an Ed25519 private key that the relays sign with (the same on
// every relay node), and the public keys the persisters accept. A consumer
// holds only public keys, so it can check a message and cannot forge one.
type Events struct {
	SigningKey string // standard base64 of a 32-byte seed
	VerifyKeys string // comma-separated standard base64 public keys
}

// Register adds --event-signing-key and --event-verify-keys and their
// check (both optional here: which roles need them is the command's rule).
func (e *Events) Register(fs *FlagSet) {
	fs.StringVar(&e.SigningKey, "event-signing-key", "", "Ed25519 key the relays sign every Kafka message with: base64 of 32 random bytes (openssl rand -base64 32), the same on every node; prefer "+EnvName("event-signing-key")+"; required unless --insecure-cluster")
	fs.StringVar(&e.VerifyKeys, "event-verify-keys", "", "public keys (base64, comma-separated) whose signatures the persisters accept besides the signing key's own: the old key during a rotation, or the only keys of a node that does not relay (bidgate event-key prints a key's)")
	fs.Check(e.check, nil)
}

func (e *Events) check() error {
	if _, err := e.Signer(); err != nil {
		return err
	}
	_, err := e.Verifier()
	return err
}

// Signer is the signing key; nil without one.
func (e Events) Signer() (*kafka.Signer, error) {
	if e.SigningKey == "" {
		return nil, nil
	}
	s, err := kafka.ParseSigningKey(e.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("--event-signing-key: %w", err)
	}
	return s, nil
}

// Verifier accepts the signing key's signatures and those of
// --event-verify-keys; nil when there is no key at all.
func (e Events) Verifier() (*kafka.Verifier, error) {
	var keys []ed25519.PublicKey
	s, err := e.Signer()
	if err != nil {
		return nil, err
	}
	if s != nil {
		keys = append(keys, s.Public())
	}
	for _, k := range strings.Split(e.VerifyKeys, ",") {
		if strings.TrimSpace(k) == "" {
			continue
		}
		pub, err := kafka.ParsePublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("--event-verify-keys: %w", err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return kafka.NewVerifier(keys...)
}
