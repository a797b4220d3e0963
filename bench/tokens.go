package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"bidgate/internal/auth"
)

// DefaultTokenTTL is how long the harness's tokens are valid. A token is
// minted again once three quarters of it have passed, so a run of any
// length never sends an expired one.
const DefaultTokenTTL = 2 * time.Hour

// Tokens mints the bearer tokens the harness sends, one per user id and
// scope (bid for bidders, sell for sellers, operator for operator calls),
// each on first use, and keeps them: after its first request a bidder's
// Authorization header is a map lookup and a copy of a cached byte slice,
// not a signature.
type Tokens struct {
	key              *auth.SigningKey
	issuer, audience string
	ttl              time.Duration
	byScope          map[string]*sync.Map // scope -> user id -> *bearer; the map itself is read-only
}

// bearer is one cached Authorization header value.
type bearer struct {
	header []byte    // "Bearer <token>"; shared, never written after it is stored
	renew  time.Time // mint another from here on
}

// NewTokens returns a token cache that signs with key for issuer and
// audience; ttl <= 0 means DefaultTokenTTL. A nil key makes every Header
// call fail (as does a nil *Tokens): for runs that send no request needing
// a token (limits).
func NewTokens(key *auth.SigningKey, issuer, audience string, ttl time.Duration) *Tokens {
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	t := &Tokens{key: key, issuer: issuer, audience: audience, ttl: ttl, byScope: map[string]*sync.Map{}}
	for _, s := range []string{auth.ScopeBid, auth.ScopeSell, auth.ScopeOperator} {
		t.byScope[s] = &sync.Map{}
	}
	return t
}

// errNoKey is Header's error when the harness has no signing key.
var errNoKey = errors.New("bidbench has no signing key to mint bearer tokens with (--key)")

// Header returns the Authorization header value ("Bearer <token>") for
// user id holding scope. The slice is shared: callers copy it (fasthttp's
// header setters do) and never write to it.
func (t *Tokens) Header(id int64, scope string) ([]byte, error) {
	if t == nil {
		return nil, errNoKey
	}
	m := t.byScope[scope]
	if m == nil {
		return nil, fmt.Errorf("no token for unknown scope %q", scope)
	}
	now := time.Now()
	if v, ok := m.Load(id); ok {
		if b := v.(*bearer); now.Before(b.renew) {
			return b.header, nil
		}
	}
	if t.key == nil {
		return nil, errNoKey
	}
	// Two workers may mint for the same new id at once; both tokens are
	// valid and the last one stored stays.
	tok, err := t.key.Mint(auth.Token{Subject: id, Scopes: []string{scope}, Issuer: t.issuer, Audience: t.audience,
		Expires: now.Add(t.ttl)})
	if err != nil {
		return nil, fmt.Errorf("mint a %s token for user %d: %w", scope, id, err)
	}
	b := &bearer{header: append([]byte("Bearer "), tok...), renew: now.Add(t.ttl * 3 / 4)}
	m.Store(id, b)
	return b.header, nil
}

// Warm mints the scope tokens of users first+1 .. first+n before a run, on
// every core, so that the load's first seconds do not pay for signatures
// (the latency of an open-loop load counts any such delay).
func (t *Tokens) Warm(first int64, n int, scope string) error {
	if t == nil || t.key == nil {
		return errNoKey
	}
	workers := runtime.GOMAXPROCS(0)
	errs := make(chan error, workers)
	var next atomic.Int64
	for range workers {
		go func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					errs <- nil
					return
				}
				if _, err := t.Header(first+i, scope); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
	for range workers {
		err = errors.Join(err, <-errs)
	}
	return err
}
