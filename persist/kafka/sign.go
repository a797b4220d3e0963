package kafka

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	kafkago "github.com/segmentio/kafka-go"
)

// Every message bidgate produces is signed with an Ed25519 private key that
// only the relays hold; its consumers (the persister, and anyone reading
// the topics) verify with the public key. A consumer that can verify cannot
// sign: reading the topics gives no power to write them. (An HMAC under a
// shared secret, which bidgate used before, let every verifier forge; it is
// neither produced nor accepted any more.)
const (
	// SignatureHeader carries the signature, standard base64 of its 64
	// bytes, over SignedBytes of the message.
	SignatureHeader = "bidgate-signature-ed25519"
	// KeyIDHeader names the public key that verifies the signature (KeyID),
	// so that a consumer accepting several keys during a rotation picks one.
	KeyIDHeader = "bidgate-signing-key"
	// signedPrefix separates these signatures from any other use of the key.
	signedPrefix = "bidgate-event-v1"
)

// SignedBytes is what a message's signature covers: the prefix
// "bidgate-event-v1", the topic and the key, each followed by a zero byte,
// then the value. A signature is good for that topic and that key (the
// auction id) only.
func SignedBytes(topic string, key, value []byte) []byte {
	b := make([]byte, 0, len(signedPrefix)+len(topic)+len(key)+len(value)+3)
	b = append(append(b, signedPrefix...), 0)
	b = append(append(b, topic...), 0)
	b = append(append(b, key...), 0)
	return append(b, value...)
}

// KeyID is the id of a public key: hex of the first 8 bytes of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Signer signs messages with the event-signing key. A nil *Signer signs
// nothing (an insecure cluster).
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// ParseSigningKey reads an event-signing key: the standard base64 of a
// 32-byte Ed25519 seed (openssl rand -base64 32 makes one).
func ParseSigningKey(s string) (*Signer, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("an event-signing key is the base64 of %d random bytes (openssl rand -base64 32)", ed25519.SeedSize)
	}
	key := ed25519.NewKeyFromSeed(seed)
	return &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}, nil
}

// Public is the key that verifies s's signatures.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign adds the signature headers to m, whose Topic must be set as it will
// be produced.
func (s *Signer) Sign(m *kafkago.Message, topic string) {
	if s == nil {
		return
	}
	sig := ed25519.Sign(s.key, SignedBytes(topic, m.Key, m.Value))
	m.Headers = append(m.Headers,
		kafkago.Header{Key: SignatureHeader, Value: []byte(base64.StdEncoding.EncodeToString(sig))},
		kafkago.Header{Key: KeyIDHeader, Value: []byte(s.id)})
}

// ParsePublicKey reads a public key as EncodePublicKey writes it: the
// standard base64 of its 32 bytes.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("an event-verifying key is the base64 of a %d-byte Ed25519 public key", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// EncodePublicKey writes pub for ParsePublicKey (and the docs' consumers).
func EncodePublicKey(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// Verifier checks messages against the public keys it accepts. A nil
// *Verifier accepts every message (an insecure cluster).
type Verifier struct {
	keys map[string]ed25519.PublicKey // by KeyID
	// roots are batch signatures verified already, so that the other
	// messages of a batch cost their path only.
	roots *lru.Cache[string, bool]
}

// verifiedRoots bounds Verifier.roots: batches in flight at once.
const verifiedRoots = 4096

// NewVerifier accepts signatures by any of keys (several during a
// rotation); it needs at least one.
func NewVerifier(keys ...ed25519.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("no event-verifying key")
	}
	roots, err := lru.New[string, bool](verifiedRoots)
	if err != nil {
		return nil, err
	}
	v := &Verifier{keys: make(map[string]ed25519.PublicKey, len(keys)), roots: roots}
	for _, k := range keys {
		v.keys[KeyID(k)] = k
	}
	return v, nil
}

// Verify reports whether m carries a signature by one of v's keys over
// its topic, key and value: its own (Sign) or its batch's (SignBatch).
// It is safe for concurrent use.
func (v *Verifier) Verify(m kafkago.Message) bool {
	if v == nil {
		return true
	}
	var sig, batchSig, proof, id []byte
	for _, h := range m.Headers {
		switch h.Key {
		case SignatureHeader:
			sig = h.Value
		case BatchSignatureHeader:
			batchSig = h.Value
		case BatchProofHeader:
			proof = h.Value
		case KeyIDHeader:
			id = h.Value
		}
	}
	key, ok := v.keys[string(id)]
	if !ok {
		return false
	}
	if proof != nil {
		return v.verifyBatch(key, m, batchSig, string(proof))
	}
	raw, err := base64.StdEncoding.DecodeString(string(sig))
	if err != nil || len(raw) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(key, SignedBytes(m.Topic, m.Key, m.Value), raw)
}

// verifyBatch checks m's path to its batch's root, and the root's
// signature unless it was verified before.
func (v *Verifier) verifyBatch(key ed25519.PublicKey, m kafkago.Message, sig []byte, proof string) bool {
	root, size, err := batchRoot(m, proof)
	if err != nil {
		return false
	}
	signed := BatchSignedBytes(size, root)
	seen := string(key) + string(sig) + string(signed)
	if v.roots.Contains(seen) {
		return true
	}
	raw, err := base64.StdEncoding.DecodeString(string(sig))
	if err != nil || len(raw) != ed25519.SignatureSize || !ed25519.Verify(key, signed, raw) {
		return false
	}
	v.roots.Add(seen, true)
	return true
}
