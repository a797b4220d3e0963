package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	secrets [][]byte // the cluster secret, then the previous one if any

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
	return s
}

// signing is the secret that signs: the first, or none.
func (s *signer) signing() []byte {
	if len(s.secrets) == 0 {
		return nil
	}
	return s.secrets[0]
}

// verifies reports whether got is the signature of parts under one of the
// secrets. Without a secret nothing verifies.
func (s *signer) verifies(got []byte, parts ...any) bool {
	ok := false
	for _, k := range s.secrets {
		// Every secret is tried, so the time taken does not say which one matched.
		ok = hmac.Equal([]byte(sign(k, parts...)), got) || ok
	}
	return ok
}

// signRequest signs req for subject and returns the signature.
func (s *signer) signRequest(req *fasthttp.Request, subject string) string {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	n := hex.EncodeToString(nonce)
	req.Header.Set(headerTimestamp, ts)
	req.Header.Set(headerNonce, n)
	req.Header.Set(headerSubject, subject)
	sig := sign(s.signing(), string(req.Header.Method()), string(req.URI().Path()),
		string(req.Header.Peek("Idempotency-Key")), ts, n, subject, req.Body())
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
	if !s.verifies(h.Peek(headerSignature), string(ctx.Method()), string(ctx.Path()), string(h.Peek("Idempotency-Key")), ts, nonce,
		string(h.Peek(headerSubject)), ctx.PostBody()) {
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
	resp.Header.Set(headerAnswerSig, sign(s.signing(), reqSig, strconv.Itoa(resp.StatusCode()), resp.Body()))
}

// verifyAnswer checks the owner's answer to the request signed reqSig.
func (s *signer) verifyAnswer(reqSig string, resp *fasthttp.Response) bool {
	return s.verifies(resp.Header.Peek(headerAnswerSig), reqSig, strconv.Itoa(resp.StatusCode()), resp.Body())
}

// sign is the hex HMAC-SHA256, under the cluster secret, of parts each
// ended by a newline, then body.
func sign(secret []byte, parts ...any) string {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			m.Write([]byte(v))
			m.Write([]byte{'\n'})
		case []byte:
			m.Write(v)
		}
	}
	return hex.EncodeToString(m.Sum(nil))
}
