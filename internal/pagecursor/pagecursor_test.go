package pagecursor

import (
	"encoding/base64"
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		secret []byte
		fields []int64
	}{
		{"cluster secret", []byte("s3cret"), []int64{42, 7}},
		{"per-process key", nil, []int64{1}},
		{"extremes", []byte("k"), []int64{0, -1, 1<<63 - 1, -1 << 63}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.secret, nil)
			got, err := s.Open("history", s.Seal("history", tc.fields...), len(tc.fields))
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != tc.fields[i] {
					t.Fatalf("field %d: %d, want %d", i, got[i], tc.fields[i])
				}
			}
		})
	}
}

func TestRefused(t *testing.T) {
	s := New([]byte("s3cret"), nil)
	good := s.Seal("history", 42, 7)
	raw, err := base64.RawURLEncoding.DecodeString(good)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), raw...)
	flipped[0] ^= 1
	tests := []struct {
		name, kind, cursor string
		n                  int
		signer             *Signer
	}{
		{"a bit flipped", "history", base64.RawURLEncoding.EncodeToString(flipped), 2, s},
		{"another listing", "my-bids", good, 2, s},
		{"another key", "history", good, 2, New([]byte("other"), nil)},
		{"a per-process key", "history", good, 2, New(nil, nil)},
		{"fewer fields", "history", good, 1, s},
		{"more fields", "history", good, 3, s},
		{"not base64", "history", "!!!", 2, s},
		{"empty", "history", "", 2, s},
		{"truncated", "history", good[:len(good)-2], 2, s},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.signer.Open(tc.kind, tc.cursor, tc.n); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Open: %v, want ErrInvalid", err)
			}
		})
	}
}

// A node whose secret is being rotated out still continues cursors made
// under the previous one.
func TestRotation(t *testing.T) {
	old := New([]byte("old"), nil)
	rotated := New([]byte("new"), []byte("old"))
	if _, err := rotated.Open("history", old.Seal("history", 5), 1); err != nil {
		t.Fatalf("a cursor of the previous secret: %v", err)
	}
	if _, err := old.Open("history", rotated.Seal("history", 5), 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("the new secret's cursor on a node that does not know it: %v", err)
	}
}
