package auth

import (
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A token one node verified for bidding is taken by another on its word,
// for bidding only: Verify still checks it, and the principal holds the
// bid scope alone whatever the token carries.
func TestVouchedTokenServesBiddingOnly(t *testing.T) {
	key := newKey(t, "EdDSA")
	a, b := verifier(t, key), verifier(t, key)
	token := mint(t, key, 42, nil, ScopeBid, ScopeSell)
	if _, err := a.Verify(token); err != nil {
		t.Fatal(err)
	}
	told := a.Vouches(10)
	if len(told) != 1 || told[0].UserID != 42 || told[0].Keys != a.KeysFingerprint() {
		t.Fatalf("vouches of the verifying node: %+v", told)
	}
	if err := b.Vouch(told[0]); err != nil {
		t.Fatal(err)
	}
	p, err := b.VerifyBidder(token)
	if err != nil || p.UserID != 42 || !p.Can(ScopeBid) || p.Can(ScopeSell) || b.SignatureChecks() != 0 {
		t.Fatalf("VerifyBidder of a vouched token: %+v, %v, %d signature checks; want user 42, bid scope only, no check", p, err, b.SignatureChecks())
	}
	if p, err := b.Verify(token); err != nil || !p.Can(ScopeSell) || b.SignatureChecks() != 1 {
		t.Fatalf("Verify of a vouched token: %+v, %v, %d signature checks; want its own check and every scope", p, err, b.SignatureChecks())
	}
	if len(b.Vouches(10)) != 1 {
		t.Fatal("a token checked after a vouch is not told on")
	}
}

// A vouch is refused when the peer's keys, issuer or audience differ from
// this node's, or it names no user or is expired; a refused one changes
// nothing.
func TestVouchRefused(t *testing.T) {
	key, other := newKey(t, "EdDSA"), newKey(t, "EdDSA")
	b := verifier(t, key)
	token := mint(t, key, 42, nil, ScopeBid)
	good := func() Vouch {
		a := verifier(t, key)
		if _, err := a.Verify(mint(t, key, 42, nil, ScopeBid)); err != nil {
			t.Fatal(err)
		}
		x := a.Vouches(1)[0]
		x.Sum = sha(token)
		return x
	}
	otherAudience, err := NewVerifier(t.Context(), Config{JWKS: jwks(t, key), Issuer: testIssuer, Audience: "another"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Vouch)
		want error
	}{
		{"other keys", func(x *Vouch) { x.Keys = verifier(t, key, other).KeysFingerprint() }, ErrKeysDiffer},
		{"other audience", func(x *Vouch) { x.Keys = otherAudience.KeysFingerprint() }, ErrKeysDiffer},
		{"no fingerprint", func(x *Vouch) { x.Keys = [32]byte{} }, ErrKeysDiffer},
		{"no user", func(x *Vouch) { x.UserID = 0 }, ErrBadVouch},
		{"expired", func(x *Vouch) { x.Expires = time.Now().Add(-time.Second) }, ErrBadVouch},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := good()
			c.edit(&x)
			if err := b.Vouch(x); !errors.Is(err, c.want) {
				t.Fatalf("Vouch: %v, want %v", err, c.want)
			}
			if _, err := b.VerifyBidder(token); err != nil || b.SignatureChecks() != 1 {
				t.Fatalf("after a refused vouch: %v, %d signature checks; want the token checked", err, b.SignatureChecks())
			}
			b.cache.rekey(b.KeysFingerprint()) // forget the token for the next case
			b.checks.Store(0)
		})
	}
}

// A vouch neither replaces a token this node verified nor outlives an
// hour or a change of keys; tokens without the bid scope are not told.
func TestVouchBounds(t *testing.T) {
	key := newKey(t, "EdDSA")
	a, b := verifier(t, key), verifier(t, key)
	token := mint(t, key, 42, nil, ScopeBid, ScopeSell)
	if _, err := b.Verify(token); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(mint(t, key, 7, nil, ScopeSell)); err != nil {
		t.Fatal(err)
	}
	if told := a.Vouches(10); len(told) != 0 {
		t.Fatalf("a token without the bid scope told: %+v", told)
	}
	forged := Vouch{Sum: sha(token), UserID: 666, Expires: time.Now().Add(time.Minute), Keys: b.KeysFingerprint()}
	if err := b.Vouch(forged); err != nil {
		t.Fatal(err)
	}
	if p, err := b.VerifyBidder(token); err != nil || p.UserID != 42 || !p.Can(ScopeSell) {
		t.Fatalf("a vouch replaced a verified token: %+v, %v", p, err)
	}

	long := mint(t, key, 43, func(tok *Token) { tok.Expires = time.Now().Add(24 * time.Hour) }, ScopeBid)
	if err := b.Vouch(Vouch{Sum: sha(long), UserID: 43, Expires: time.Now().Add(24 * time.Hour), Keys: b.KeysFingerprint()}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.cache.get(sha(long), time.Now().Add(maxVouchTTL), true); ok {
		t.Fatal("a vouched token taken past maxVouchTTL")
	}
	b.cache.rekey(b.KeysFingerprint())
	if _, err := b.VerifyBidder(long); err != nil || b.SignatureChecks() != 2 {
		t.Fatalf("after a change of keys: %v, %d signature checks; want the token checked", err, b.SignatureChecks())
	}
}

// The fingerprint is of the keys, not of how they are written: a file
// with other spacing, a fixed set and a fetched one of the same keys agree.
func TestKeysFingerprintOfTheKeys(t *testing.T) {
	key := newKey(t, "EdDSA")
	set := jwks(t, key)
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, path, append([]byte("\n  "), set...))
	fromFile, err := NewVerifier(t.Context(), Config{JWKSFile: path, Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	fixed := verifier(t, key)
	if fromFile.KeysFingerprint() != fixed.KeysFingerprint() || fixed.KeysFingerprint() == ([32]byte{}) {
		t.Fatalf("fingerprints differ: file %x, fixed %x", fromFile.KeysFingerprint(), fixed.KeysFingerprint())
	}
	if verifier(t, newKey(t, "EdDSA")).KeysFingerprint() == fixed.KeysFingerprint() {
		t.Fatal("two key sets with one fingerprint")
	}
}

func sha(token string) [32]byte { return sha256.Sum256([]byte(token)) }
