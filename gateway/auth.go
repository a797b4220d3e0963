package gateway

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"bidgate"
	"bidgate/internal/auth"
)

// Authenticator is what the gateway needs to know who is calling.
type Authenticator interface {
	Verify(token string) (auth.Principal, error)
}

// signatureCounter is an Authenticator that counts the signatures it checks
// (auth.Verifier): bidgate_token_signature_checks_total.
type signatureCounter interface {
	SignatureChecks() uint64
}

// The refusals of a request without a token this node accepts.
var (
	errNoToken         = refuse(fasthttp.StatusUnauthorized, "unauthenticated", "this route needs Authorization: Bearer <token>")
	errNoTokenAccepted = refuse(fasthttp.StatusUnauthorized, "unauthenticated", "this node accepts no token")
	errInvalidToken    = refuse(fasthttp.StatusUnauthorized, "unauthenticated",
		"the bearer token is malformed, expired, not yet valid, wrongly signed or not for this service")
)

// authorized wraps a handler that needs a caller holding scope. It answers
// 401 for a missing or invalid token (RFC 6750), 403 for a missing scope,
// and 429 for an address that failed authentication too often: a flood of
// bad tokens costs one map lookup each, not a signature check.
func (s *Server) authorized(scope string, h func(*fasthttp.RequestCtx, auth.Principal)) fasthttp.RequestHandler {
	return s.authorizedAny([]string{scope}, h)
}

// bidding is authorized for placing a bid: it also takes a token another
// node verified and told this one (tokens.go), since that node may forward
// the same bid naming the same bidder.
func (s *Server) bidding(h func(*fasthttp.RequestCtx, auth.Principal)) fasthttp.RequestHandler {
	return s.authorizedVia(true, []string{auth.ScopeBid}, h)
}

// authorizedAny is authorized for a handler that any one of scopes lets
// in (a user's own notices are theirs whether they bid or sell). A token
// with none of them is 403, its challenge naming them all.
func (s *Server) authorizedAny(scopes []string, h func(*fasthttp.RequestCtx, auth.Principal)) fasthttp.RequestHandler {
	return s.authorizedVia(false, scopes, h)
}

// authorizedVia is authorizedAny; told says whether a token told by a peer
// will do.
func (s *Server) authorizedVia(told bool, scopes []string, h func(*fasthttp.RequestCtx, auth.Principal)) fasthttp.RequestHandler {
	lacks := "the token lacks the scope " + scopes[0]
	if len(scopes) > 1 {
		lacks = "the token has none of the scopes " + strings.Join(scopes, ", ")
	}
	challenge := `Bearer realm="bidgate", error="insufficient_scope", scope="` + strings.Join(scopes, " ") + `"`
	return func(ctx *fasthttp.RequestCtx) {
		if s.cfg.AuthOff {
			h(ctx, auth.Principal{}) // no user: the body names one
			return
		}
		p, ok := s.authenticate(ctx, told)
		if !ok {
			return
		}
		if !slices.ContainsFunc(scopes, p.Can) {
			ctx.Response.Header.Set("WWW-Authenticate", challenge)
			s.writeError(ctx, refuse(fasthttp.StatusForbidden, "forbidden", lacks))
			return
		}
		h(ctx, p)
	}
}

// viewer wraps a public handler whose answer depends on who asks: the
// caller is the token's subject when the request carries a valid token,
// else anonymous (the zero Principal). A bad token is ignored, as on every
// public route: it gets the public answer, which shows nothing it should
// not.
func (s *Server) viewer(h func(*fasthttp.RequestCtx, auth.Principal)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		var p auth.Principal
		if token, ok := bearerToken(ctx.Request.Header.Peek("Authorization")); ok && !s.cfg.AuthOff && s.cfg.Auth != nil {
			if v, err := s.cfg.Auth.Verify(token); err == nil {
				p = v
			}
		}
		h(ctx, p)
	}
}

// authenticate verifies the request's bearer token, or, when told is true,
// takes a peer's word for it. On failure it has answered: 401 for a
// missing or invalid token (RFC 6750), 429 for an address that failed too
// often.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, told bool) (auth.Principal, bool) {
	addr := ctx.RemoteIP().String()
	if wait, limited := s.authFailures.limited(addr); limited {
		tooMany := refuse(fasthttp.StatusTooManyRequests, "rate_limited", "too many failed authentications from this address; retry later")
		tooMany.problem.RetryAfterSeconds = int(math.Ceil(wait.Seconds()))
		s.writeError(ctx, tooMany)
		return auth.Principal{}, false
	}
	token, ok := bearerToken(ctx.Request.Header.Peek("Authorization"))
	if !ok {
		s.authFailures.fail(addr)
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="bidgate"`)
		s.writeError(ctx, errNoToken)
		return auth.Principal{}, false
	}
	if s.cfg.Auth == nil {
		s.authFailures.fail(addr)
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="bidgate", error="invalid_token"`)
		s.writeError(ctx, errNoTokenAccepted)
		return auth.Principal{}, false
	}
	var p auth.Principal
	var err error
	if told && s.tokens != nil {
		p, err = s.tokens.voucher.VerifyBidder(token)
	} else {
		p, err = s.cfg.Auth.Verify(token)
	}
	if err != nil {
		s.authFailures.fail(addr)
		s.metrics.authFailures.Inc()
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="bidgate", error="invalid_token", error_description="the token is malformed, expired, not yet valid, wrongly signed or not for this service"`)
		s.writeError(ctx, errInvalidToken)
		return auth.Principal{}, false
	}
	return p, true
}

// bearerToken reads the token of an Authorization header "Bearer <token>"
// (the scheme in any case).
func bearerToken(h []byte) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !bytes.EqualFold(h[:len(scheme)], []byte(scheme)) {
		return "", false
	}
	t := bytes.TrimSpace(h[len(scheme):])
	return string(t), len(t) > 0
}

// actingUser is the user a request acts as: the token's subject, or, with
// authentication off (subject 0), the user the body names in its member
// (an *InputError with code when it names none). A body that names another
// user than the token's subject is ErrSubjectMismatch.
func actingUser(subject int64, named *int64, member, code string) (int64, error) {
	switch {
	case subject == 0 && named == nil: // authentication is off
		return 0, bidgate.InvalidInput(code, member+" is required when authentication is off")
	case subject == 0:
		return *named, nil
	case named != nil && *named != subject:
		return 0, bidgate.ErrSubjectMismatch
	}
	return subject, nil
}

// failureLimiter is a token bucket per client address, drawn on only by
// failed authentications.
type failureLimiter struct {
	rate  rate.Limit
	burst int

	mu        sync.Mutex
	addrs     map[string]*rate.Limiter
	lastSweep time.Time
	maxIdle   time.Duration
}

func newFailureLimiter(perSecond float64, burst int) *failureLimiter {
	return &failureLimiter{rate: rate.Limit(perSecond), burst: burst, addrs: map[string]*rate.Limiter{},
		maxIdle: time.Duration(float64(burst)/perSecond*float64(time.Second)) + time.Second}
}

// limited reports whether addr has no failure left, and how long until it
// has one.
func (f *failureLimiter) limited(addr string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.addrs[addr]
	if l == nil {
		return 0, false
	}
	now := time.Now()
	if l.TokensAt(now) >= 1 {
		return 0, false
	}
	r := l.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return wait, true
}

// fail draws one failure from addr's bucket.
func (f *failureLimiter) fail(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if now.Sub(f.lastSweep) > f.maxIdle {
		// A full bucket is the same as none: forget addresses that are.
		for a, l := range f.addrs {
			if l.TokensAt(now) >= float64(f.burst) {
				delete(f.addrs, a)
			}
		}
		f.lastSweep = now
	}
	l := f.addrs[addr]
	if l == nil {
		l = rate.NewLimiter(f.rate, f.burst)
		f.addrs[addr] = l
	}
	l.AllowN(now, 1)
}
