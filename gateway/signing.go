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
// node only relays an answer a member made for that request.
type signer struct {
	secret []byte

	mu        sync.Mutex
	seen      map[string]time.Time // nonces accepted, until they leave the window
	lastSweep time.Time            // when seen was last swept of nonces out of the window
}

func newSigner(secret []byte) *signer {
	return &signer{secret: secret, seen: map[string]time.Time{}}
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
	sig := sign(s.secret, string(req.Header.Method()), string(req.URI().Path()),
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
	if err != nil || len(s.secret) == 0 || len(nonce) != 32 {
		return errUnsigned
	}
	want := sign(s.secret, string(ctx.Method()), string(ctx.Path()), string(h.Peek("Idempotency-Key")), ts, nonce,
		string(h.Peek(headerSubject)), ctx.PostBody())
	if !hmac.Equal([]byte(want), h.Peek(headerSignature)) {
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
	resp.Header.Set(headerAnswerSig, sign(s.secret, reqSig, strconv.Itoa(resp.StatusCode()), resp.Body()))
}

// verifyAnswer checks the owner's answer to the request signed reqSig.
func (s *signer) verifyAnswer(reqSig string, resp *fasthttp.Response) bool {
	want := sign(s.secret, reqSig, strconv.Itoa(resp.StatusCode()), resp.Body())
	return len(s.secret) > 0 && hmac.Equal([]byte(want), resp.Header.Peek(headerAnswerSig))
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
