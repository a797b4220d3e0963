// Package pagecursor makes the cursors of keyset pagination tamper-proof:
// a cursor is the position where a page ended plus an HMAC over it, so a
// client can only continue where bidgate stopped, never make one up.
package pagecursor

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// ErrInvalid: the cursor was not issued by bidgate for this listing (or its
// key), or was altered.
var ErrInvalid = errors.New("invalid cursor")

// macSize is the bytes of the HMAC kept: 128 bits is far past guessing.
const macSize = 16

// maxFields bounds what Open decodes: no listing keeps more.
const maxFields = 8

// Signer issues and checks cursors under a key.
type Signer struct {
	keys [][]byte // the first signs; all are accepted
}

// New is a Signer whose key is derived from secret (the cluster secret, so
// that any node continues another's cursor), accepting also those made
// under previous (a secret being rotated out). Without a secret the key is
// random: cursors then hold on this process only.
func New(secret, previous []byte) *Signer {
	if len(secret) == 0 {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			panic(err) // crypto/rand never fails on supported systems
		}
		return &Signer{keys: [][]byte{k}}
	}
	s := &Signer{keys: [][]byte{derive(secret)}}
	if len(previous) > 0 {
		s.keys = append(s.keys, derive(previous))
	}
	return s
}

// derive keeps the secret's use for cursors apart from its other uses.
func derive(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("bidgate page cursor v1"))
	return m.Sum(nil)
}

// Seal is the cursor of a position (fields) in the listing named kind.
func (s *Signer) Seal(kind string, fields ...int64) string {
	b := make([]byte, 0, len(fields)*binary.MaxVarintLen64+macSize)
	for _, f := range fields {
		b = binary.AppendVarint(b, f)
	}
	b = append(b, mac(s.keys[0], kind, b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open returns the n fields of a cursor Seal made for kind, or ErrInvalid.
func (s *Signer) Open(kind, cursor string, n int) ([]int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < macSize || n > maxFields {
		return nil, ErrInvalid
	}
	body, sum := b[:len(b)-macSize], b[len(b)-macSize:]
	ok := false
	for _, k := range s.keys {
		ok = ok || hmac.Equal(sum, mac(k, kind, body))
	}
	if !ok {
		return nil, ErrInvalid
	}
	fields := make([]int64, 0, n)
	for len(body) > 0 && len(fields) < n {
		f, used := binary.Varint(body)
		if used <= 0 {
			return nil, ErrInvalid
		}
		fields, body = append(fields, f), body[used:]
	}
	if len(fields) != n || len(body) > 0 {
		return nil, ErrInvalid
	}
	return fields, nil
}

func mac(key []byte, kind string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write(body)
	return m.Sum(nil)[:macSize]
}
