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
	gen     uint64
	entries map[[32]byte]cachedToken
}

type cachedToken struct {
	p   Principal
	exp time.Time
	gen uint64
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[[32]byte]cachedToken)}
}

// get returns the cached principal of a token, if it has one still valid at
// now, and the generation a verification done now belongs to.
func (c *tokenCache) get(sum [32]byte, now time.Time) (Principal, bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[sum]
	if !ok || e.gen != c.gen || !now.Before(e.exp) {
		return Principal{}, false, c.gen
	}
	return e.p, true, c.gen
}

// put caches a token verified in generation gen; one verified against keys
// that have changed since is dropped.
func (c *tokenCache) put(sum [32]byte, p Principal, exp time.Time, gen uint64) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.entries) >= c.max {
		c.evict(time.Now())
	}
	c.entries[sum] = cachedToken{p: p, exp: exp, gen: gen}
}

// evict drops expired entries and, if that is not enough, every other one
// (map order is random, so which is arbitrary).
func (c *tokenCache) evict(now time.Time) {
	i := 0
	for k, e := range c.entries {
		if !now.Before(e.exp) || e.gen != c.gen || i%2 == 0 {
			delete(c.entries, k)
		}
		i++
	}
}

// clear forgets every token: the keys changed.
func (c *tokenCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.entries = make(map[[32]byte]cachedToken)
}
