package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// The dev cluster's token issuer, audience and key file (relative to the
// checkout's root, git-ignored).
const (
	DevIssuer   = "bidgate-dev"
	DevAudience = "bidgate"
	DevKeyFile  = ".bidgate/dev-key.pem"
)

// SigningKey mints tokens: the dev cluster's key, a test's, the bench
// harness's. Production tokens come from the identity provider, not this.
type SigningKey struct {
	ID     string // kid: derived from the public key
	signer crypto.Signer
	method jwt.SigningMethod
	alg    jwkset.ALG
}

// GenerateKey makes a new key for alg: "EdDSA", "ES256" or "RS256".
func GenerateKey(alg string) (*SigningKey, error) {
	var s crypto.Signer
	var err error
	switch alg {
	case "EdDSA":
		_, s, err = ed25519.GenerateKey(rand.Reader)
	case "ES256":
		s, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "RS256":
		s, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, fmt.Errorf("no key for algorithm %q", alg)
	}
	if err != nil {
		return nil, err
	}
	return newSigningKey(s)
}

func newSigningKey(s crypto.Signer) (*SigningKey, error) {
	k := &SigningKey{signer: s}
	switch s.(type) {
	case ed25519.PrivateKey:
		k.method, k.alg = jwt.SigningMethodEdDSA, jwkset.AlgEdDSA
	case *ecdsa.PrivateKey:
		k.method, k.alg = jwt.SigningMethodES256, jwkset.AlgES256
	case *rsa.PrivateKey:
		k.method, k.alg = jwt.SigningMethodRS256, jwkset.AlgRS256
	default:
		return nil, fmt.Errorf("unsupported key type %T", s)
	}
	der, err := x509.MarshalPKIXPublicKey(s.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	k.ID = base64.RawURLEncoding.EncodeToString(sum[:12])
	return k, nil
}

// LoadKey reads a PKCS #8 PEM private key.
func LoadKey(path string) (*SigningKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	b, _ := pem.Decode(raw)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("signing key %s: not a PEM PRIVATE KEY", path)
	}
	key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("signing key %s: cannot sign", path)
	}
	return newSigningKey(s)
}

// LoadOrCreateKey reads the key at path, creating an Ed25519 one (mode
// 0600) if there is none; created says which.
func LoadOrCreateKey(path string) (k *SigningKey, created bool, err error) {
	k, err = LoadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	if k, err = GenerateKey("EdDSA"); err != nil {
		return nil, false, err
	}
	if err := k.Save(path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process created it first
			k, err = LoadKey(path)
			return k, false, err
		}
		return nil, false, err
	}
	return k, true, nil
}

// Save writes the private key to a new file (mode 0600); it never
// overwrites one.
func (k *SigningKey) Save(path string) error {
	der, err := x509.MarshalPKCS8PrivateKey(k.signer)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("signing key %s: %w", path, err)
	}
	return f.Close()
}

// JWKS is the public half of keys as a JSON Web Key Set, what a verifier
// is given.
func JWKS(keys ...*SigningKey) ([]byte, error) {
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(k.signer.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.ID, ALG: k.alg, USE: jwkset.UseSig}})
		if err != nil {
			return nil, fmt.Errorf("JWK of key %s: %w", k.ID, err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	return json.Marshal(set)
}

// Token is what Mint signs.
type Token struct {
	Subject          int64
	Scopes           []string
	Issuer, Audience string
	Expires          time.Time // required
	NotBefore        time.Time // zero: none
}

// Mint signs t.
func (k *SigningKey) Mint(t Token) (string, error) {
	c := claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(t.Subject, 10),
		Issuer:    t.Issuer,
		Audience:  jwt.ClaimStrings{t.Audience},
		ExpiresAt: jwt.NewNumericDate(t.Expires),
		IssuedAt:  jwt.NewNumericDate(time.Now()),
	}}
	if !t.NotBefore.IsZero() {
		c.NotBefore = jwt.NewNumericDate(t.NotBefore)
	}
	c.Scope = strings.Join(t.Scopes, " ")
	tok := jwt.NewWithClaims(k.method, c)
	tok.Header["kid"] = k.ID
	return tok.SignedString(k.signer)
}
