// Package cursor seals and opens the page cursors of bidgate's lists: an
// opaque base64url token that carries a position (the last row's sort key
// and id) bound to the list it came from (its sort and filters), with an
// HMAC so that a client can neither forge nor alter one. A position is no
// secret; the MAC is there because a forged one would make a page start
// anywhere the client likes, in a list it did not ask for.
package cursor

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// version leads every token, so that a later format can tell old ones.
const version = 1

const (
	scopeLen = 8  // bytes of the list's hash: a token of another list is refused
	macLen   = 16 // bytes of HMAC-SHA256 kept
	// MaxTokenLen bounds what Open decodes: a position is a few dozen bytes.
	MaxTokenLen = 512
)

// ErrInvalid is every refusal of a token: malformed, altered, sealed under
// another key, or from another list. The reasons are not told apart, to
// the client or in logs.
var ErrInvalid = errors.New("invalid cursor")

// Sealer seals positions under a node-wide key and opens them under it or
// a previous one (during a rotation of the cluster secret).
type Sealer struct {
	key      []byte
	previous []byte // nil: none
}

// New derives the cursor keys from the cluster secret (and the previous one
// during a rotation), so that every node of a cluster opens every node's
// cursors. The derivation keeps cursor MACs apart from the other uses of
// the secret. With no secret (one node, or an insecure cluster) the key is
// random: cursors open only on the node that sealed them, until it restarts;
// elsewhere they are refused, and the client starts from the first page.
func New(secret, previous []byte) *Sealer {
	if len(secret) == 0 {
		key := make([]byte, 32)
		rand.Read(key) // never fails (crypto/rand since Go 1.24)
		return &Sealer{key: key}
	}
	s := &Sealer{key: derive(secret)}
	if len(previous) > 0 {
		s.previous = derive(previous)
	}
	return s
}

func derive(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("bidgate list cursor v1"))
	return m.Sum(nil)
}

// Seal returns the token of position within the list named by scope (a
// canonical form of its sort and filters).
func (s *Sealer) Seal(scope string, position []byte) string {
	b := make([]byte, 0, 1+scopeLen+len(position)+macLen)
	b = append(b, version)
	b = append(b, scopeHash(scope)...)
	b = append(b, position...)
	b = append(b, mac(s.key, b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open returns the position a token of Seal carries, or ErrInvalid when
// the token was not sealed by a node of this cluster, was altered, or was
// sealed for another scope.
func (s *Sealer) Open(scope, token string) ([]byte, error) {
	if len(token) > MaxTokenLen {
		return nil, ErrInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < 1+scopeLen+macLen || b[0] != version {
		return nil, ErrInvalid
	}
	body, sum := b[:len(b)-macLen], b[len(b)-macLen:]
	if !hmac.Equal(sum, mac(s.key, body)) && (s.previous == nil || !hmac.Equal(sum, mac(s.previous, body))) {
		return nil, ErrInvalid
	}
	if !bytes.Equal(body[1:1+scopeLen], scopeHash(scope)) {
		return nil, ErrInvalid
	}
	return body[1+scopeLen:], nil
}

func mac(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)[:macLen]
}

func scopeHash(scope string) []byte {
	h := sha256.Sum256([]byte(scope))
	return h[:scopeLen]
}

// SealInts is Seal of a position made of integers (an id, a seq...).
func (s *Sealer) SealInts(scope string, fields ...int64) string {
	b := make([]byte, 0, 8*len(fields))
	for _, f := range fields {
		b = binary.BigEndian.AppendUint64(b, uint64(f))
	}
	return s.Seal(scope, b)
}

// OpenInts is Open of a position SealInts made of n integers.
func (s *Sealer) OpenInts(scope, token string, n int) ([]int64, error) {
	b, err := s.Open(scope, token)
	if err != nil || len(b) != 8*n {
		return nil, ErrInvalid
	}
	fields := make([]int64, n)
	for i := range fields {
		fields[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
	}
	return fields, nil
}
