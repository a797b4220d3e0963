package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"bidgate/internal/await"
)

const (
	testIssuer   = "https://issuer.test/"
	testAudience = "bidgate-test"
)

func newKey(t testing.TB, alg string) *SigningKey {
	t.Helper()
	k, err := GenerateKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func jwks(t testing.TB, keys ...*SigningKey) []byte {
	t.Helper()
	set, err := JWKS(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// verifier trusts keys, given as a fixed JWKS.
func verifier(t testing.TB, keys ...*SigningKey) *Verifier {
	t.Helper()
	v, err := NewVerifier(t.Context(), Config{JWKS: jwks(t, keys...), Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// mint signs a token of user with scopes, for the test issuer and
// audience, valid for an hour; edit changes it first.
func mint(t testing.TB, k *SigningKey, user int64, edit func(*Token), scopes ...string) string {
	t.Helper()
	tok := Token{Subject: user, Scopes: scopes, Issuer: testIssuer, Audience: testAudience, Expires: time.Now().Add(time.Hour)}
	if edit != nil {
		edit(&tok)
	}
	s, err := k.Mint(tok)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signRaw signs any claims with k's algorithm and kid: what Mint cannot
// produce (no exp, a subject that is no user id).
func signRaw(t testing.TB, k *SigningKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.ID
	s, err := tok.SignedString(k.signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validClaims() jwt.MapClaims {
	return jwt.MapClaims{"sub": "42", "scope": "bid", "iss": testIssuer, "aud": testAudience,
		"exp": time.Now().Add(time.Hour).Unix()}
}

func TestVerifyEveryAlgorithm(t *testing.T) {
	var keys []*SigningKey
	for _, alg := range Algorithms {
		keys = append(keys, newKey(t, alg))
	}
	v := verifier(t, keys...)
	for i, k := range keys {
		t.Run(Algorithms[i], func(t *testing.T) {
			p, err := v.Verify(mint(t, k, int64(40+i), nil, ScopeBid, ScopeSell))
			if err != nil {
				t.Fatal(err)
			}
			if p.UserID != int64(40+i) || !p.Can(ScopeBid) || !p.Can(ScopeSell) || p.Can(ScopeOperator) {
				t.Fatalf("principal %+v", p)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	key, other := newKey(t, "EdDSA"), newKey(t, "ES256")
	v := verifier(t, key)
	without := func(name string) jwt.MapClaims {
		c := validClaims()
		delete(c, name)
		return c
	}
	withClaim := func(name string, value any) jwt.MapClaims {
		c := validClaims()
		c[name] = value
		return c
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims())
	none.Header["kid"] = key.ID
	unsigned, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// HS256 keyed with the public key, the classic algorithm confusion.
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, validClaims())
	hs.Header["kid"] = key.ID
	hmacked, err := hs.SignedString([]byte(key.signer.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	// A token of another key that claims this key's kid: the signature,
	// not the kid, decides.
	stolenKid := func(k *SigningKey) string {
		tok := jwt.NewWithClaims(k.method, validClaims())
		tok.Header["kid"] = key.ID
		s, err := tok.SignedString(k.signer)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct{ name, token string }{
		{"empty", ""},
		{"garbage", "garbage"},
		{"three garbage segments", "a.b.c"},
		{"alg none", unsigned},
		{"HS256 keyed with the public key", hmacked},
		{"signed by another key", mint(t, other, 42, nil, ScopeBid)},
		{"another key of the same algorithm claiming this key's kid", stolenKid(newKey(t, "EdDSA"))},
		{"another key of another algorithm claiming this key's kid", stolenKid(other)},
		{"expired a minute ago", mint(t, key, 42, func(tk *Token) { tk.Expires = time.Now().Add(-time.Minute) }, ScopeBid)},
		{"not valid for 2 minutes", mint(t, key, 42, func(tk *Token) { tk.NotBefore = time.Now().Add(2 * time.Minute) }, ScopeBid)},
		{"wrong audience", mint(t, key, 42, func(tk *Token) { tk.Audience = "other" }, ScopeBid)},
		{"wrong issuer", mint(t, key, 42, func(tk *Token) { tk.Issuer = "https://evil.test/" }, ScopeBid)},
		{"no exp", signRaw(t, key, without("exp"))},
		{"no iss", signRaw(t, key, without("iss"))},
		{"no aud", signRaw(t, key, without("aud"))},
		{"no sub", signRaw(t, key, without("sub"))},
		{"sub not a user id", signRaw(t, key, withClaim("sub", "abc"))},
		{"sub with a leading zero", signRaw(t, key, withClaim("sub", "042"))},
		{"sub as a number", signRaw(t, key, withClaim("sub", 42))},
		{"audience among others not ours", signRaw(t, key, withClaim("aud", []string{"a", "b"}))},
		{"a valid token with a byte changed", tamper(mint(t, key, 42, nil, ScopeBid))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := v.Verify(c.token)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify: %+v, %v; want ErrInvalidToken", p, err)
			}
			if c.token != "" && strings.Contains(err.Error(), c.token) {
				t.Fatalf("the error holds the token: %v", err)
			}
		})
	}
}

// tamper changes one character in the middle of the signature.
func tamper(token string) string {
	b := []byte(token)
	i := strings.LastIndexByte(token, '.') + (len(token)-strings.LastIndexByte(token, '.'))/2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// exp and nbf have at most 30 s of leeway, however much is configured.
func TestLeeway(t *testing.T) {
	key := newKey(t, "EdDSA")
	expired := func(ago time.Duration) string {
		return mint(t, key, 42, func(tk *Token) { tk.Expires = time.Now().Add(-ago) }, ScopeBid)
	}
	early := func(ahead time.Duration) string {
		return mint(t, key, 42, func(tk *Token) { tk.NotBefore = time.Now().Add(ahead) }, ScopeBid)
	}
	newVerifier := func(leeway time.Duration) *Verifier {
		v, err := NewVerifier(t.Context(), Config{JWKS: jwks(t, key), Issuer: testIssuer, Audience: testAudience, Leeway: leeway})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name   string
		leeway time.Duration
		token  string
		ok     bool
	}{
		{"expired 20s ago", 0, expired(20 * time.Second), true},
		{"expired 60s ago", 0, expired(time.Minute), false},
		{"valid in 20s", 0, early(20 * time.Second), true},
		{"valid in 60s", 0, early(time.Minute), false},
		{"expired 60s ago with an hour configured", time.Hour, expired(time.Minute), false},
		{"expired 20s ago with 5s configured", 5 * time.Second, expired(20 * time.Second), false},
		{"expired 2s ago with 5s configured", 5 * time.Second, expired(2 * time.Second), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := newVerifier(c.leeway).Verify(c.token)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("got %v, want ErrInvalidToken", err)
			}
		})
	}
}

func TestParseSubject(t *testing.T) {
	for sub, want := range map[string]int64{"42": 42, "1": 1, "9223372036854775807": 1<<63 - 1} {
		if got, err := ParseSubject(sub); err != nil || got != want {
			t.Errorf("ParseSubject(%q) = %d, %v; want %d", sub, got, err, want)
		}
	}
	for _, sub := range []string{"042", "+1", "-1", "0", "00", "abc", "", " 42", "42 ", "4_2", "1e3", "0x2a", "42.0",
		"9223372036854775808", strings.Repeat("9", 100)} {
		if got, err := ParseSubject(sub); err == nil {
			t.Errorf("ParseSubject(%q) = %d, want an error", sub, got)
		} else if len(sub) > 30 && strings.Contains(err.Error(), sub) {
			t.Errorf("ParseSubject: the error repeats a long subject whole: %v", err)
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic: the watcher never reads half a file
		t.Fatal(err)
	}
}

// What the file watcher logs once it holds a file's new keys, and when it
// cannot read the file (it keeps the keys read before).
const (
	reloaded   = "JWKS file changed; keys reloaded"
	unreadable = "reload the JWKS file failed; retrying"
)

// Key rotation with a JWKS file: old and new key, then the new alone. An
// unreadable file keeps the keys read before.
func TestJWKSFileRotation(t *testing.T) {
	oldKey, newKey, third := newKey(t, "EdDSA"), newKey(t, "ES256"), newKey(t, "RS256")
	file := filepath.Join(t.TempDir(), "jwks.json")
	writeFile(t, file, jwks(t, oldKey, newKey))
	log := await.NewLog()
	v, err := NewVerifier(t.Context(), Config{JWKSFile: file, Issuer: testIssuer, Audience: testAudience,
		FileCheck: 20 * time.Millisecond, Log: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	oldToken, newToken, thirdToken := mint(t, oldKey, 1, nil, ScopeBid), mint(t, newKey, 2, nil, ScopeBid), mint(t, third, 3, nil, ScopeBid)
	for _, tok := range []string{oldToken, newToken} {
		if _, err := v.Verify(tok); err != nil {
			t.Fatalf("with both keys in the file: %v", err)
		}
	}
	if _, err := v.Verify(thirdToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a key not in the file: %v", err)
	}

	writeFile(t, file, jwks(t, newKey))
	log.Message(t, reloaded, 5*time.Second)
	if _, err := v.Verify(oldToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the old key after it left the file: %v", err)
	}
	if _, err := v.Verify(newToken); err != nil {
		t.Fatalf("the new key after the old one left: %v", err)
	}

	writeFile(t, file, []byte("not a JWKS"))
	log.Message(t, unreadable, 5*time.Second)
	if _, err := v.Verify(newToken); err != nil {
		t.Fatalf("the keys read before an unreadable file: %v", err)
	}
	writeFile(t, file, jwks(t, third))
	log.Message(t, reloaded, 5*time.Second)
	if _, err := v.Verify(thirdToken); err != nil {
		t.Fatalf("a key written after an unreadable file: %v", err)
	}
	if _, err := v.Verify(newToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a key that left the file: %v", err)
	}
}

// Key rotation with a JWKS URL: a token with an unknown kid makes the
// verifier fetch the set again, which drops the keys no longer in it; that
// refetch is rate limited, so a flood of unknown kids does not reach the
// issuer.
func TestJWKSURLRotation(t *testing.T) {
	oldKey, newKey, unknown := newKey(t, "EdDSA"), newKey(t, "RS256"), newKey(t, "ES256")
	var served atomic.Pointer[[]byte]
	var fetches atomic.Int32
	set := jwks(t, oldKey)
	served.Store(&set)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(*served.Load()); err != nil {
			t.Errorf("serve the JWKS: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	v, err := NewVerifier(t.Context(), Config{JWKSURL: srv.URL, Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	oldToken := mint(t, oldKey, 1, nil, ScopeBid)
	if _, err := v.Verify(oldToken); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(oldToken); err != nil || fetches.Load() != 1 {
		t.Fatalf("second verification: %v, %d fetches, want 1 (the set is cached)", err, fetches.Load())
	}

	rotated := jwks(t, newKey)
	served.Store(&rotated)
	p, err := v.Verify(mint(t, newKey, 2, nil, ScopeBid))
	if err != nil || p.UserID != 2 {
		t.Fatalf("a token of the new key: %+v, %v", p, err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2: the unknown kid refetches the set", n)
	}
	if _, err := v.Verify(oldToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a token of the key no longer served: %v", err)
	}
	for range 3 {
		if _, err := v.Verify(mint(t, unknown, 3, nil, ScopeBid)); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("a token of a key never served: %v", err)
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after unknown kids, want still 2 (refetching is rate limited)", n)
	}
}

func TestNewVerifierNeedsOneKeySourceIssuerAndAudience(t *testing.T) {
	key := newKey(t, "EdDSA")
	dir := t.TempDir()
	file, broken := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "broken.json")
	writeFile(t, file, jwks(t, key))
	writeFile(t, broken, []byte(`{"keys":`))
	good := func(edit func(*Config)) Config {
		c := Config{JWKS: jwks(t, key), Issuer: testIssuer, Audience: testAudience}
		edit(&c)
		return c
	}
	cases := map[string]Config{
		"no issuer":        good(func(c *Config) { c.Issuer = "" }),
		"no audience":      good(func(c *Config) { c.Audience = "" }),
		"no key source":    good(func(c *Config) { c.JWKS = nil }),
		"two key sources":  good(func(c *Config) { c.JWKSFile = file }),
		"missing file":     good(func(c *Config) { c.JWKS, c.JWKSFile = nil, file+".missing" }),
		"file not a JWKS":  good(func(c *Config) { c.JWKS, c.JWKSFile = nil, broken }),
		"fixed set broken": good(func(c *Config) { c.JWKS = []byte("{") }),
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := NewVerifier(t.Context(), cfg); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dev-key.pem")
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first call: created %v, %v", created, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("key file mode %o, want 600", mode)
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || k2.ID != k1.ID {
		t.Fatalf("second call: created %v, kid %s (first %s), %v", created, k2.ID, k1.ID, err)
	}
	if err := newKey(t, "EdDSA").Save(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Save over an existing key: %v, want fs.ErrExist", err)
	}
	// What the loaded key signs, the created key's JWKS verifies.
	p, err := verifier(t, k1).Verify(mint(t, k2, 7, nil, ScopeOperator))
	if err != nil || p.UserID != 7 || !slices.Equal(p.Scopes, []string{ScopeOperator}) {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, alg := range []string{"ES256", "RS256"} {
		path := filepath.Join(t.TempDir(), alg+".pem")
		k := newKey(t, alg)
		if err := k.Save(path); err != nil {
			t.Fatal(err)
		}
		if loaded, err := LoadKey(path); err != nil || loaded.ID != k.ID {
			t.Fatalf("%s: loaded %v, %v", alg, loaded, err)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(notPEM); err == nil {
		t.Fatal("a file that is no key: want an error, not a new key")
	}
}

// BenchmarkVerify is the cost of authenticating one bid: cold (the
// signature checked, as for a token's first request) and warm (cached).
func BenchmarkVerify(b *testing.B) {
	for _, alg := range Algorithms {
		for _, cache := range []struct {
			name string
			size int
		}{{"cold", -1}, {"warm", 0}} {
			b.Run(alg+"/"+cache.name, func(b *testing.B) {
				key := newKey(b, alg)
				v, err := NewVerifier(b.Context(), Config{JWKS: jwks(b, key), Issuer: testIssuer, Audience: testAudience, CacheSize: cache.size})
				if err != nil {
					b.Fatal(err)
				}
				tok := mint(b, key, 42, nil, ScopeBid)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.Verify(tok); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A verified token is served from the cache until it expires, never past
// its exp, and a change of keys empties the cache.
func TestTokenCache(t *testing.T) {
	c := newTokenCache(4)
	now := time.Now()
	e := cachedToken{p: Principal{UserID: 7, Scopes: []string{ScopeBid}}, exp: now.Add(time.Minute)}
	_, _, at := c.get([32]byte{1}, now, false)
	c.put([32]byte{1}, e, at)
	if got, ok, _ := c.get([32]byte{1}, now, false); !ok || got.UserID != 7 {
		t.Fatalf("cached token: %+v %v", got, ok)
	}
	if _, ok, _ := c.get([32]byte{1}, now.Add(time.Minute), false); ok {
		t.Fatal("a token served from the cache at its exp")
	}
	c.rekey([32]byte{9})
	if _, ok, _ := c.get([32]byte{1}, now, false); ok {
		t.Fatal("a token served after the keys changed")
	}
	c.put([32]byte{2}, e, at) // verified before the change
	if _, ok, _ := c.get([32]byte{2}, now, false); ok {
		t.Fatal("a token verified with the old keys cached after the change")
	}
	_, _, at = c.get([32]byte{3}, now, false)
	for i := range 100 {
		c.put([32]byte{byte(i)}, e, at)
		if len(c.entries) > 4 {
			t.Fatalf("%d entries, bound 4", len(c.entries))
		}
	}
}

// signJSON signs header and claims exactly as written (a member twice, a
// date as a string), which no JSON encoder produces; the header is k's
// algorithm and kid when empty.
func signJSON(t testing.TB, k *SigningKey, header, claims string) string {
	t.Helper()
	if header == "" {
		header = fmt.Sprintf(`{"alg":%q,"kid":%q,"typ":"JWT"}`, k.method.Alg(), k.ID)
	}
	unsigned := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	sig, err := k.method.Sign(unsigned, k.signer)
	if err != nil {
		t.Fatal(err)
	}
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Header and claims are read strictly, signed or not: a member named twice
// (the JWT library takes the last, another reader the first), a
// NumericDate given as a string, invalid UTF-8 or anything after the
// object is an invalid token.
func TestVerifyReadsClaimsStrictly(t *testing.T) {
	key := newKey(t, "EdDSA")
	v := verifier(t, key)
	exp := time.Now().Add(time.Hour).Unix()
	iss := fmt.Sprintf(`"iss":%q,"aud":%q`, testIssuer, testAudience)
	alg := fmt.Sprintf(`"alg":%q`, key.method.Alg())
	kid := fmt.Sprintf(`"kid":%q`, key.ID)
	cases := []struct {
		name           string
		header, claims string
		ok             bool
	}{
		{"plain", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d}`, iss, exp), true},
		{"exp with a fraction", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d.5}`, iss, exp), true},
		{"nbf and iat numbers", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"nbf":%d,"iat":%d}`, iss, exp, exp-7200, exp-3600), true},
		{"sub twice", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"sub":"43"}`, iss, exp), false},
		{"sub twice, once escaped", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"s\u0075b":"43"}`, iss, exp), false},
		{"exp twice", "", fmt.Sprintf(`{"sub":"42",%s,"exp":1,"exp":%d}`, iss, exp), false},
		{"scope twice", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"scope":"bid","scope":"operator"}`, iss, exp), false},
		{"exp as a string", "", fmt.Sprintf(`{"sub":"42",%s,"exp":"%d"}`, iss, exp), false},
		{"nbf as a string", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"nbf":"%d"}`, iss, exp, exp-7200), false},
		{"iat as a string", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"iat":"%d"}`, iss, exp, exp-3600), false},
		{"exp as null", "", fmt.Sprintf(`{"sub":"42",%s,"exp":null}`, iss), false},
		{"invalid UTF-8 in a claim", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d,"scope":"bid\xff"}`, iss, exp), false},
		{"data after the claims", "", fmt.Sprintf(`{"sub":"42",%s,"exp":%d} {"sub":"43"}`, iss, exp), false},
		{"claims not an object", "", `["sub","42"]`, false},
		{"alg twice in the header", fmt.Sprintf(`{"alg":"HS256",%s,%s}`, kid, alg), fmt.Sprintf(`{"sub":"42",%s,"exp":%d}`, iss, exp), false},
		{"kid twice in the header", fmt.Sprintf(`{%s,"kid":"other",%s}`, alg, kid), fmt.Sprintf(`{"sub":"42",%s,"exp":%d}`, iss, exp), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token := signJSON(t, key, c.header, c.claims)
			p, err := v.Verify(token)
			switch {
			case c.ok && err != nil:
				t.Fatalf("Verify: %v", err)
			case c.ok && p.UserID != 42:
				t.Fatalf("principal %+v", p)
			case !c.ok && !errors.Is(err, ErrInvalidToken):
				t.Fatalf("Verify: %+v, %v; want ErrInvalidToken", p, err)
			case !c.ok && strings.Contains(err.Error(), strings.Split(token, ".")[1]):
				t.Fatalf("the error holds the token: %v", err)
			}
		})
	}
}
