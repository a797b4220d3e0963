package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// signatureWindow bounds how far a forwarded request's timestamp may be
// from the receiving node's clock. Node clocks serve only here, to bound
// replays; never for a decision about an auction.
const signatureWindow = 10 * time.Second

// signer authenticates forwarding both ways with the cluster secret: a
// forwarded bid is signed (its method, path, key, time, nonce, subject and
// body) and accepted once, within the window; the owner's answer is signed
// over the request's signature, its status and its body, so a forwarding
// node only relays an answer a member made for that request. During a
// rotation of the secret two are accepted: the first signs, either
// verifies.
type signer struct {
	secrets [][]byte    // the cluster secret, then the previous one if any
	macs    []sync.Pool // of *mac, one pool per secret

	mu        sync.Mutex
	seen      map[string]time.Time // nonces accepted, until they leave the window
	lastSweep time.Time            // when seen was last swept of nonces out of the window
}

func newSigner(secret, previous []byte) *signer {
	s := &signer{seen: map[string]time.Time{}}
	for _, k := range [][]byte{secret, previous} {
		if len(k) > 0 {
			s.secrets = append(s.secrets, k)
		}
	}
	s.macs = make([]sync.Pool, len(s.secrets))
	for i, k := range s.secrets {
		s.macs[i].New = func() any { return &mac{h: hmac.New(sha256.New, k)} }
	}
	return s
}

// sign is the signature of parts under the signing secret (the first);
// without a secret, under an empty key, which nothing verifies.
func (s *signer) sign(body []byte, parts ...string) []byte {
	if len(s.secrets) == 0 {
		return (&mac{h: hmac.New(sha256.New, nil)}).sum(body, parts...)
	}
	return s.signWith(0, body, parts...)
}

// verifies reports whether got is the signature of parts under one of the
// secrets. Without a secret nothing verifies.
func (s *signer) verifies(got, body []byte, parts ...string) bool {
	ok := false
	for i := range s.secrets {
		// Every secret is tried, so the time taken does not say which one matched.
		ok = hmac.Equal(s.signWith(i, body, parts...), got) || ok
	}
	return ok
}

// signRequest signs req, a POST to path, for subject and returns the
// signature. path is the caller's: req.URI() would parse the whole URI
// again for it.
func (s *signer) signRequest(req *fasthttp.Request, path, subject string) string {
	var nonce [16]byte
	rand.Read(nonce[:])
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	n := hex.EncodeToString(nonce[:])
	req.Header.Set(headerTimestamp, ts)
	req.Header.Set(headerNonce, n)
	req.Header.Set(headerSubject, subject)
	sig := string(s.sign(req.Body(), string(req.Header.Method()), path, string(req.Header.Peek("Idempotency-Key")), ts, n, subject))
	req.Header.Set(headerSignature, sig)
	return sig
}

var (
	errUnsigned = errors.New("not signed with the cluster secret")
	errStale    = errors.New("signed outside the accepted window")
	errReplayed = errors.New("already accepted once")
)

// verifyRequest checks a forwarded request: signature, age and a nonce not
// seen before.
func (s *signer) verifyRequest(ctx *fasthttp.RequestCtx) error {
	h := &ctx.Request.Header
	ts, nonce := string(h.Peek(headerTimestamp)), string(h.Peek(headerNonce))
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(nonce) != 32 {
		return errUnsigned
	}
	if !s.verifies(h.Peek(headerSignature), ctx.PostBody(), string(ctx.Method()), string(ctx.Path()), string(h.Peek("Idempotency-Key")), ts, nonce,
		string(h.Peek(headerSubject))) {
		return errUnsigned
	}
	now := time.Now()
	if age := now.Sub(time.Unix(sec, 0)); age > signatureWindow || age < -signatureWindow {
		return errStale
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) > signatureWindow {
		for n, until := range s.seen {
			if now.After(until) {
				delete(s.seen, n)
			}
		}
		s.lastSweep = now
	}
	if _, ok := s.seen[nonce]; ok {
		return errReplayed
	}
	// Kept until its timestamp leaves the window: after that the age check
	// refuses it anyway.
	s.seen[nonce] = time.Unix(sec, 0).Add(signatureWindow + time.Second)
	return nil
}

// signAnswer signs the owner's answer to the request signed reqSig.
func (s *signer) signAnswer(reqSig string, resp *fasthttp.Response) {
	resp.Header.SetBytesV(headerAnswerSig, s.sign(resp.Body(), reqSig, strconv.Itoa(resp.StatusCode())))
}

// verifyAnswer checks the owner's answer to the request signed reqSig.
func (s *signer) verifyAnswer(reqSig string, resp *fasthttp.Response) bool {
	return s.verifies(resp.Header.Peek(headerAnswerSig), resp.Body(), reqSig, strconv.Itoa(resp.StatusCode()))
}

// mac is an HMAC-SHA256 keyed with one secret and the buffer its parts are
// gathered in: keying one and writing each part alone were most of a
// signature's cost, on every forwarded bid both ways.
type mac struct {
	h   hash.Hash
	buf []byte
}

// signWith is the signature of parts under secret i.
func (s *signer) signWith(i int, body []byte, parts ...string) []byte {
	m := s.macs[i].Get().(*mac)
	defer s.macs[i].Put(m)
	return m.sum(body, parts...)
}

// sum is the hex HMAC-SHA256 of parts each ended by a newline, then body.
func (m *mac) sum(body []byte, parts ...string) []byte {
	m.buf = m.buf[:0]
	for _, p := range parts {
		m.buf = append(append(m.buf, p...), '\n')
	}
	m.h.Reset()
	m.h.Write(m.buf)
	m.h.Write(body)
	var sum [sha256.Size]byte
	return hex.AppendEncode(nil, m.h.Sum(sum[:0]))
}
