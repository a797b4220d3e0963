package cursor

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

func TestSealOpens(t *testing.T) {
	pos := []byte("0123456789abcdef")
	cases := []struct {
		name         string
		sealer       *Sealer
		opener       *Sealer
		sealScope    string
		openScope    string
		wantOpenable bool
	}{
		{"same secret, same scope", New([]byte("s1"), nil), New([]byte("s1"), nil), "a|ending", "a|ending", true},
		{"same secret, other scope", New([]byte("s1"), nil), New([]byte("s1"), nil), "a|ending", "a|newest", false},
		{"other secret", New([]byte("s1"), nil), New([]byte("s2"), nil), "a", "a", false},
		{"sealed before a rotation", New([]byte("old"), nil), New([]byte("new"), []byte("old")), "a", "a", true},
		{"previous secret is not the current one", New([]byte("older"), nil), New([]byte("new"), []byte("old")), "a", "a", false},
		{"no secret: another node's random key", New(nil, nil), New(nil, nil), "a", "a", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.opener.Open(c.openScope, c.sealer.Seal(c.sealScope, pos))
			if c.wantOpenable != (err == nil) {
				t.Fatalf("open: %v, want openable %v", err, c.wantOpenable)
			}
			if err == nil && !bytes.Equal(got, pos) {
				t.Fatalf("opened %q, want %q", got, pos)
			}
		})
	}
	// A node without a secret opens its own cursors.
	s := New(nil, nil)
	if _, err := s.Open("a", s.Seal("a", pos)); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesAlteredTokens(t *testing.T) {
	s := New([]byte("secret"), nil)
	token := s.Seal("scope", []byte("0123456789abcdef"))
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"empty":         "",
		"truncated":     base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1]),
		"too short":     base64.RawURLEncoding.EncodeToString(raw[:10]),
		"extended":      base64.RawURLEncoding.EncodeToString(append(bytes.Clone(raw), 0)),
		"padded base64": base64.URLEncoding.EncodeToString(raw) + "=",
		"std base64":    strings.NewReplacer("-", "+", "_", "/").Replace(token) + "+/",
		"too long":      strings.Repeat("A", MaxTokenLen+4),
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(raw)
			b[i] ^= bit
			bad[fmt.Sprintf("byte %d bit %#x flipped", i, bit)] = base64.RawURLEncoding.EncodeToString(b)
		}
	}
	for name, tok := range bad {
		if _, err := s.Open("scope", tok); err != ErrInvalid {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
