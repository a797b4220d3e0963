// Package auth is bidgate's identity: it verifies the OAuth 2.0 bearer
// tokens (JWTs, RFC 7519) that clients send, against the issuer's JWKS, and
// says who the caller is and what they may do. It also mints tokens with a
// key of its own, for the dev cluster, tests and the bench harness.
//
// Only asymmetric signatures are accepted (EdDSA, ES256, RS256): a verifier
// that holds no secret cannot be made to sign, and "alg: none" or an HMAC
// keyed with a public key is refused. exp is required, nbf honoured, iss and
// aud always checked, with at most Leeway of clock skew. Header and claims
// are read strictly: a member named twice, or exp, nbf or iat not a JSON
// number, is an invalid token.
package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"bidgate"
)

// Scopes a token may carry in its space-separated "scope" claim.
const (
	ScopeBid      = "bid"      // place bids, buy now
	ScopeSell     = "sell"     // create auctions
	ScopeOperator = "operator" // promote, cluster routes
)

// Algorithms are the signature algorithms a token may use.
var Algorithms = []string{"EdDSA", "ES256", "RS256"}

// MaxLeeway bounds the clock skew allowed on exp and nbf.
const MaxLeeway = 30 * time.Second

// Principal is an authenticated caller: the token's subject and scopes.
type Principal struct {
	UserID int64
	Scopes []string
}

// Can reports whether the caller holds scope.
func (p Principal) Can(scope string) bool { return slices.Contains(p.Scopes, scope) }

// ErrInvalidToken is wrapped by every verification failure. Its message
// never holds the token.
var ErrInvalidToken = errors.New("invalid token")

// Config says which tokens a Verifier accepts. Exactly one key source is
// given: JWKSFile, JWKSURL or JWKS.
type Config struct {
	JWKSFile string          // re-read when it changes, checked every FileCheck
	JWKSURL  string          // fetched, refreshed hourly and on an unknown kid
	JWKS     json.RawMessage // a fixed set (the dev key's)
	Issuer   string          // required iss
	Audience string          // required in aud
	// Leeway is the clock skew allowed on exp and nbf; more than MaxLeeway
	// is cut to it.
	Leeway    time.Duration
	FileCheck time.Duration // how often a file or fetched set is checked for changes
	// CacheSize bounds the verified tokens kept; negative keeps none
	// (every token is checked every time).
	CacheSize int
	Log       *slog.Logger
}

// DefaultConfig is the one statement of the verifier's defaults:
// NewVerifier fills a zero field from it.
func DefaultConfig() Config {
	return Config{Leeway: MaxLeeway, FileCheck: 5 * time.Second, CacheSize: 65536}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Leeway = min(cmp.Or(c.Leeway, d.Leeway), MaxLeeway)
	c.FileCheck = cmp.Or(c.FileCheck, d.FileCheck)
	c.CacheSize = cmp.Or(c.CacheSize, d.CacheSize)
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// Validate reports a configuration no verifier can run with.
func (c Config) Validate() error {
	switch {
	case c.Issuer == "" || c.Audience == "":
		return errors.New("token verification needs an issuer and an audience")
	case c.Leeway < 0:
		return fmt.Errorf("the token leeway must not be negative, got %s", c.Leeway)
	case c.FileCheck < 0:
		return fmt.Errorf("the JWKS check interval must not be negative, got %s", c.FileCheck)
	}
	return nil
}

// Verifier checks bearer tokens. It is safe for concurrent use.
//
// A signature check costs about 100 µs, more than the rest of a bid, so
// verified tokens are cached (by their SHA-256) until they expire. A change
// of keys empties the cache: a token of a removed key is refused at once.
// The tokens it verifies for bidding are told to the other nodes
// (vouch.go), which then need not check them again to take a bid.
type Verifier struct {
	keys    jwt.Keyfunc
	recheck func() // nil unless the keys may change during a verification
	parser  *jwt.Parser
	cache   *tokenCache
	checks  atomic.Uint64 // signatures checked (tokens not found in the cache)
	told    *vouchQueue   // tokens verified here, for the other nodes
}

// NewVerifier returns a Verifier; a key source that runs in the background
// (a watched file, a fetched URL) stops when ctx ends.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cache := newTokenCache(cfg.CacheSize)
	keys, recheck, err := openKeySet(ctx, cfg, func(set []byte) { cache.rekey(fingerprint(cfg, set)) })
	if err != nil {
		return nil, err
	}
	return &Verifier{keys: keys, recheck: recheck, cache: cache, told: newVouchQueue(), parser: jwt.NewParser(
		jwt.WithValidMethods(Algorithms),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(cfg.Leeway),
	)}, nil
}

type claims struct {
	jwt.RegisteredClaims
	Scope string `json:"scope"`
}

// Verify checks a token (without its "Bearer " prefix) and returns its
// principal, or an error wrapping ErrInvalidToken.
func (v *Verifier) Verify(token string) (Principal, error) { return v.check(token, false) }

// check answers token from the cache (a token a peer vouched for only when
// vouched is true), else verifies it.
func (v *Verifier) check(token string, vouched bool) (Principal, error) {
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	p, ok, at := v.cache.get(sum, now, vouched)
	if ok {
		return p, nil
	}
	return v.verify(token, sum, now, at)
}

// verify checks the signature and claims of token (SHA-256 sum) at now, in
// the generation of keys at, and caches it.
func (v *Verifier) verify(token string, sum [32]byte, now time.Time, at stamp) (Principal, error) {
	if err := checkStrictJSON(token); err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	v.checks.Add(1)
	var c claims
	_, err := v.parser.ParseWithClaims(token, &c, v.keys)
	if v.recheck != nil {
		v.recheck() // this very check may have fetched new keys
	}
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	id, err := ParseSubject(c.Subject)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	p := Principal{UserID: id, Scopes: strings.Fields(c.Scope)}
	// Only a token valid without leeway is cached, or told: within the
	// leeway the parser decides each time.
	if c.NotBefore == nil || !c.NotBefore.After(now) {
		v.cache.put(sum, cachedToken{p: p, exp: c.ExpiresAt.Time}, at)
		if p.Can(ScopeBid) {
			v.told.add(Vouch{Sum: sum, UserID: id, Expires: c.ExpiresAt.Time, Keys: at.keys})
		}
	}
	return p, nil
}

// SignatureChecks is how many tokens Verify checked the signature of rather
// than found in its cache: the costly part of authentication, paid once per
// token on each node that sees it.
func (v *Verifier) SignatureChecks() uint64 { return v.checks.Load() }

// ParseSubject reads a user id as tokens carry it in sub: a canonical
// positive decimal int64 (bidgate.ParseID).
func ParseSubject(sub string) (int64, error) {
	n, err := bidgate.ParseID(sub)
	if err != nil {
		return 0, fmt.Errorf("sub: %w", err)
	}
	return n, nil
}
