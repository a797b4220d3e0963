package auth

import (
	"crypto/sha256"
	"errors"
	"sync"
	"time"
)

// A node that checked a token's signature tells the other nodes, so that a
// token costs about one check in the cluster rather than one on every node
// it reaches (some 85 µs each with Ed25519, and a client behind a load
// balancer reaches them all). A peer's word is worth only what a peer may
// already assert: the bidder of a bid it forwards. So a vouched token
// serves VerifyBidder (placing a bid, buying now) and nothing else, and
// only when the peer verified it with the same keys, issuer and audience.

// Vouch is a node's word that it verified a token with the bid scope.
type Vouch struct {
	Sum     [32]byte  // SHA-256 of the token
	UserID  int64     // its subject
	Expires time.Time // its exp
	Keys    [32]byte  // the fingerprint of the keys it was verified with (KeysFingerprint)
}

// maxVouchTTL bounds how long a vouched token is taken without a check of
// this node's own, whatever its exp.
const maxVouchTTL = time.Hour

// The refusals of a vouch.
var (
	ErrKeysDiffer = errors.New("vouch: verified with other keys, issuer or audience than this node's")
	ErrBadVouch   = errors.New("vouch: no valid subject, or expired")
)

// fingerprint identifies what a token is verified against: the keys (a
// JWKS), the issuer and the audience. Nodes whose fingerprints are equal
// reach the same verdict on any token.
func fingerprint(cfg Config, set []byte) [32]byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte("bidgate-keys-v1"), []byte(cfg.Issuer), []byte(cfg.Audience), set} {
		h.Write(part)
		h.Write([]byte{0})
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// KeysFingerprint is the fingerprint of the keys, issuer and audience the
// verifier checks tokens with now.
func (v *Verifier) KeysFingerprint() [32]byte { return v.cache.current().keys }

// VerifyBidder is Verify for a caller that only places bids: it also takes
// a token another node vouched for (Vouch), as a principal holding the bid
// scope alone.
func (v *Verifier) VerifyBidder(token string) (Principal, error) { return v.check(token, true) }

// Vouch takes another node's word that it verified a token: VerifyBidder
// will take the token without checking it until it expires (an hour at
// most), unless the keys change first. It refuses a vouch made with other
// keys (ErrKeysDiffer) and one without a subject or already expired
// (ErrBadVouch).
func (v *Verifier) Vouch(x Vouch) error {
	now := time.Now()
	at := v.cache.current()
	switch {
	case at.keys == [32]byte{} || x.Keys != at.keys:
		return ErrKeysDiffer
	case x.UserID <= 0 || !now.Before(x.Expires):
		return ErrBadVouch
	}
	exp := x.Expires
	if limit := now.Add(maxVouchTTL); exp.After(limit) {
		exp = limit
	}
	v.cache.put(x.Sum, cachedToken{p: Principal{UserID: x.UserID, Scopes: []string{ScopeBid}}, exp: exp, vouched: true}, at)
	return nil
}

// Vouches takes up to max of the tokens verified here with the bid scope
// since the last call, oldest first, to be told to the other nodes.
func (v *Verifier) Vouches(max int) []Vouch { return v.told.take(max) }

// VouchesReady receives when Vouches has some to take.
func (v *Verifier) VouchesReady() <-chan struct{} { return v.told.ready }

// vouchQueue holds the tokens verified here until they are told. It is
// bounded: a node nobody takes them from (a single node) keeps the first
// maxQueuedVouches and drops the rest, which costs the peers a check each.
type vouchQueue struct {
	ready chan struct{}

	mu     sync.Mutex
	queued []Vouch
}

// maxQueuedVouches bounds a vouchQueue.
const maxQueuedVouches = 4096

func newVouchQueue() *vouchQueue { return &vouchQueue{ready: make(chan struct{}, 1)} }

func (q *vouchQueue) add(x Vouch) {
	if x.Keys == [32]byte{} {
		return // no fingerprint, no peer would take it
	}
	q.mu.Lock()
	if len(q.queued) < maxQueuedVouches {
		q.queued = append(q.queued, x)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *vouchQueue) take(max int) []Vouch {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(max, len(q.queued))
	out := append([]Vouch(nil), q.queued[:n]...)
	q.queued = q.queued[n:]
	if len(q.queued) > 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return out
}
