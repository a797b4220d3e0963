package kafka

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

// A batch of messages is signed once: the relays produce thousands a
// second, and an Ed25519 signature per message (and its verification by
// every consumer) was most of the pipeline's CPU. The signature covers the
// root of a Merkle tree over the batch's messages; each message carries
// the signature and its path to the root, so it verifies on its own, and a
// consumer that verified a root already checks only the path (two
// SHA-256 per level).
const (
	// BatchSignatureHeader carries the signature, standard base64 of its 64
	// bytes, over BatchSignedBytes of the batch's size and root; the key is
	// named by KeyIDHeader.
	BatchSignatureHeader = "bidgate-batch-signature-ed25519"
	// BatchProofHeader is "<index>/<size>/<path>": the message's place in
	// the batch, the batch's size, and the standard base64 of the sibling
	// hashes (32 bytes each) from the message's leaf up to the root.
	BatchProofHeader = "bidgate-batch-proof"
	batchPrefix      = "bidgate-batch-v1"
)

// leafHash is a message's leaf: SHA-256 of a zero byte and its SignedBytes.
func leafHash(topic string, key, value []byte) [32]byte {
	b := make([]byte, 1, 1+signedLen(topic, key, value))
	return sha256.Sum256(appendSigned(b, topic, key, value))
}

// nodeHash is an inner node: SHA-256 of a one byte and its children. The
// leading byte keeps a leaf from passing for a node.
func nodeHash(left, right [32]byte) [32]byte {
	b := make([]byte, 0, 65)
	b = append(append(append(b, 1), left[:]...), right[:]...)
	return sha256.Sum256(b)
}

// BatchSignedBytes is what a batch signature covers: the prefix
// "bidgate-batch-v1", a zero byte, the batch's size in decimal, a zero
// byte, then the root.
func BatchSignedBytes(size int, root [32]byte) []byte {
	b := append([]byte(batchPrefix), 0)
	b = append(strconv.AppendInt(b, int64(size), 10), 0)
	return append(b, root[:]...)
}

// SignBatch signs msgs, to be produced to topic, with one signature (a
// single message gets Sign's). The tree pairs the nodes of each level in
// order; an odd last node goes up unpaired.
func (s *Signer) SignBatch(msgs []kafkago.Message, topic string) {
	if s == nil || len(msgs) == 0 {
		return
	}
	if len(msgs) == 1 {
		s.Sign(&msgs[0], topic)
		return
	}
	level := make([][32]byte, len(msgs))
	for i, m := range msgs {
		level[i] = leafHash(topic, m.Key, m.Value)
	}
	paths := make([][]byte, len(msgs))
	at := make([]int, len(msgs)) // each message's index in the level
	for i := range at {
		at[i] = i
	}
	for len(level) > 1 {
		for i, j := range at {
			if sib := j ^ 1; sib < len(level) {
				paths[i] = append(paths[i], level[sib][:]...)
			}
			at[i] = j / 2
		}
		next := make([][32]byte, 0, (len(level)+1)/2)
		for j := 0; j < len(level); j += 2 {
			if j+1 < len(level) {
				next = append(next, nodeHash(level[j], level[j+1]))
			} else {
				next = append(next, level[j])
			}
		}
		level = next
	}
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, BatchSignedBytes(len(msgs), level[0])))
	size := strconv.Itoa(len(msgs))
	for i := range msgs {
		proof := strconv.Itoa(i) + "/" + size + "/" + base64.StdEncoding.EncodeToString(paths[i])
		msgs[i].Headers = append(msgs[i].Headers,
			kafkago.Header{Key: BatchSignatureHeader, Value: []byte(sig)},
			kafkago.Header{Key: BatchProofHeader, Value: []byte(proof)},
			kafkago.Header{Key: KeyIDHeader, Value: []byte(s.id)})
	}
}

// maxBatch bounds the size a proof may give, far above any relay's pass,
// so that no header makes a climb long.
const maxBatch = 1 << 30

// proof is a parsed BatchProofHeader.
type proof struct {
	index, size int
	path        []byte // sibling hashes, 32 bytes each, from the leaf's level up
}

// parseProof reads "<index>/<size>/<path>", whose path must be as long as
// a batch of size gives index.
func parseProof(s string) (proof, error) {
	at, rest, ok1 := strings.Cut(s, "/")
	of, encoded, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 {
		return proof{}, fmt.Errorf("proof is not index/size/path")
	}
	index, err1 := strconv.Atoi(at)
	size, err2 := strconv.Atoi(of)
	path, err3 := base64.StdEncoding.DecodeString(encoded)
	if err1 != nil || err2 != nil || err3 != nil || size < 2 || size > maxBatch || index < 0 || index >= size {
		return proof{}, fmt.Errorf("malformed proof")
	}
	if len(path) != 32*pathLen(index, size) {
		return proof{}, fmt.Errorf("proof of %d bytes for message %d of %d", len(path), index, size)
	}
	return proof{index: index, size: size, path: path}, nil
}

// pathLen is how many siblings lie on the path of message index of a batch
// of size: an odd last node of a level goes up unpaired.
func pathLen(index, size int) int {
	n := 0
	for ; size > 1; size = (size + 1) / 2 {
		if index^1 < size {
			n++
		}
		index /= 2
	}
	return n
}

// root is the root m's path leads to.
func (p proof) root(m kafkago.Message) [32]byte {
	return p.climb(m, func(int, int, [32]byte) bool { return true })
}

// climb hashes m's leaf up its path to the root. It shows visit each node
// on the way, the leaf first, with its level and index in that level, and
// stops early when visit returns false. It returns the last node it
// hashed: the root when visit never stopped it.
func (p proof) climb(m kafkago.Message, visit func(level, index int, h [32]byte) bool) [32]byte {
	h := leafHash(m.Topic, m.Key, m.Value)
	path, index := p.path, p.index
	for level, n := 0, p.size; ; level, n = level+1, (n+1)/2 {
		if !visit(level, index, h) || n <= 1 {
			return h
		}
		if sib := index ^ 1; sib < n {
			var s [32]byte
			copy(s[:], path[:32])
			path = path[32:]
			if index%2 == 0 {
				h = nodeHash(h, s)
			} else {
				h = nodeHash(s, h)
			}
		}
		index /= 2
	}
}
