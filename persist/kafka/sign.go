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
	return appendSigned(make([]byte, 0, signedLen(topic, key, value)), topic, key, value)
}

// appendSigned appends SignedBytes(topic, key, value) to b.
func appendSigned(b []byte, topic string, key, value []byte) []byte {
	b = append(append(b, signedPrefix...), 0)
	b = append(append(b, topic...), 0)
	b = append(append(b, key...), 0)
	return append(b, value...)
}

// signedLen is the length of SignedBytes(topic, key, value).
func signedLen(topic string, key, value []byte) int {
	return len(signedPrefix) + len(topic) + len(key) + len(value) + 3
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
	return v.verify(m, nil)
}

// Fetch verifies the messages of one fetch, as Verify does each. A node
// that one message's path proved (it led to a root whose signature holds)
// is not hashed again for the next message of the same batch, which then
// costs its leaf and a node or two rather than its whole path: a relay's
// batch is a hundred messages and more, and a fetch holds runs of them. A
// Fetch is for one goroutine; a nil one (of a nil Verifier) accepts every
// message.
type Fetch struct {
	v       *Verifier
	batches map[string]fetchedBatch // by batch signature
	proven  map[provenNode][32]byte
}

// fetchedBatch is a batch a Fetch proved nodes of: the key id and size its
// first proved message gave, and the number its nodes go by.
type fetchedBatch struct {
	id     string
	size   int
	number int
}

// provenNode is a node of a batch's tree: its level (the leaves' is 0) and
// its index there.
type provenNode struct{ batch, level, index int }

// Fetch starts the verification of one fetch's messages.
func (v *Verifier) Fetch() *Fetch {
	if v == nil {
		return nil
	}
	return &Fetch{v: v, batches: make(map[string]fetchedBatch), proven: make(map[provenNode][32]byte)}
}

// Verify reports whether m carries a signature by one of the verifier's
// keys, as Verifier.Verify does.
func (f *Fetch) Verify(m kafkago.Message) bool {
	if f == nil {
		return true
	}
	return f.v.verify(m, f)
}

// verify is Verify, in fetch f when it is not nil.
func (v *Verifier) verify(m kafkago.Message, f *Fetch) bool {
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
	if proof == nil {
		raw, err := base64.StdEncoding.DecodeString(string(sig))
		if err != nil || len(raw) != ed25519.SignatureSize {
			return false
		}
		return ed25519.Verify(key, SignedBytes(m.Topic, m.Key, m.Value), raw)
	}
	p, err := parseProof(string(proof))
	if err != nil {
		return false
	}
	if f != nil {
		return f.verifyBatch(key, m, string(id), batchSig, p)
	}
	return v.rootSigned(key, batchSig, p.size, p.root(m))
}

// verifyBatch checks m's path as far as a node proved already, or to the
// root and its signature; the nodes it hashed are proved once either
// holds. The batch is named by its signature, key id and size, which the
// signature covers with the root: a message that reuses them with another
// path must still hash to a proved node, which SHA-256 makes as hard as
// forging the root.
func (f *Fetch) verifyBatch(key ed25519.PublicKey, m kafkago.Message, id string, sig []byte, p proof) bool {
	b, known := f.batches[string(sig)]
	if known && (b.id != id || b.size != p.size) {
		// Not the batch whose nodes are proved: on its own.
		return f.v.rootSigned(key, sig, p.size, p.root(m))
	}
	if !known {
		b = fetchedBatch{id: id, size: p.size, number: len(f.batches)}
	}
	var hashed [32]struct { // a tree of maxBatch leaves has 31 levels, its root's included
		at provenNode
		h  [32]byte
	}
	n, met, matched := 0, false, false
	top := p.climb(m, func(level, index int, h [32]byte) bool {
		at := provenNode{batch: b.number, level: level, index: index}
		if want, ok := f.proven[at]; ok {
			met, matched = true, want == h
			return false
		}
		hashed[n].at, hashed[n].h = at, h
		n++
		return true
	})
	if met && !matched || !met && !f.v.rootSigned(key, sig, p.size, top) {
		return false
	}
	if !known {
		f.batches[string(sig)] = b
	}
	for _, x := range hashed[:n] {
		f.proven[x.at] = x.h
	}
	return true
}

// rootSigned reports whether sig is key's signature over a batch of size
// with root, remembering the roots it verified.
func (v *Verifier) rootSigned(key ed25519.PublicKey, sig []byte, size int, root [32]byte) bool {
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
