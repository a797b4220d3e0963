package auth

import (
	"sync"
	"time"
)

// tokenCache holds verified tokens, by SHA-256, until they expire. Its
// generation moves on every change of keys; an entry of an older
// generation is never served, so clearing costs nothing up front.
type tokenCache struct {
	max int

	mu      sync.RWMutex
	now     stamp
	entries map[[32]byte]cachedToken
}

// stamp is a generation of keys: its number, and the fingerprint of the
// keys, issuer and audience it verifies with (zero while none is known).
type stamp struct {
	gen  uint64
	keys [32]byte
}

type cachedToken struct {
	p   Principal
	exp time.Time
	gen uint64
	// vouched: a peer verified it (Vouch), so it serves VerifyBidder only.
	vouched bool
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[[32]byte]cachedToken)}
}

// get returns the cached principal of a token, if it has one still valid at
// now (a vouched one only when vouched is true), and the generation a
// verification done now belongs to.
func (c *tokenCache) get(sum [32]byte, now time.Time, vouched bool) (Principal, bool, stamp) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[sum]
	if !ok || e.gen != c.now.gen || !now.Before(e.exp) || e.vouched && !vouched {
		return Principal{}, false, c.now
	}
	return e.p, true, c.now
}

// put caches a token verified in generation at; one verified against keys
// that have changed since is dropped. A vouched entry never replaces a
// token this node verified itself.
func (c *tokenCache) put(sum [32]byte, e cachedToken, at stamp) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.gen != c.now.gen {
		return
	}
	if old, ok := c.entries[sum]; ok && e.vouched && !old.vouched && old.gen == at.gen {
		return
	}
	if len(c.entries) >= c.max {
		c.evict(time.Now())
	}
	e.gen = at.gen
	c.entries[sum] = e
}

// current is the generation of keys in force.
func (c *tokenCache) current() stamp {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.now
}

// evict drops expired entries and, if that is not enough, every other one
// (map order is random, so which is arbitrary).
func (c *tokenCache) evict(now time.Time) {
	i := 0
	for k, e := range c.entries {
		if !now.Before(e.exp) || e.gen != c.now.gen || i%2 == 0 {
			delete(c.entries, k)
		}
		i++
	}
}

// rekey forgets every token: the keys changed, to those of fingerprint keys.
func (c *tokenCache) rekey(keys [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = stamp{gen: c.now.gen + 1, keys: keys}
	c.entries = make(map[[32]byte]cachedToken)
}
