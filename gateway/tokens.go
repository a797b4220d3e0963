package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
	"bidgate/internal/retry"
	"bidgate/ring"
)

// Each node tells the other gateway nodes the tokens it verified for
// bidding (auth's vouches), so that a bidder's token costs one signature
// check in the cluster rather than one on every node its requests reach:
// in a three-node flash sale those checks were the largest part of what
// three nodes cost over one. A told token serves only the bid route, which
// a peer may already act on for any bidder (it forwards bids, naming the
// bidder), and only between nodes that verify with the same keys.
const (
	tokensPath = "/verified-tokens" // the internal route that takes them
	// tellEvery gathers the tokens verified meanwhile into one request per
	// peer; a bidder's next request rarely follows within it.
	tellEvery = 100 * time.Millisecond
	// maxToldTokens bounds the tokens of one request (about 110 bytes
	// each, well under the internal endpoint's body limit).
	maxToldTokens = 256
)

// voucher is an Authenticator whose verified tokens the nodes share
// (auth.Verifier).
type voucher interface {
	VerifyBidder(token string) (auth.Principal, error)
	Vouch(auth.Vouch) error
	Vouches(max int) []auth.Vouch
	VouchesReady() <-chan struct{}
	KeysFingerprint() [32]byte
}

// toldTokens is the body of POST /verified-tokens.
type toldTokens struct {
	Keys   string      `json:"keys"` // the fingerprint of the teller's keys, issuer and audience
	Tokens []toldToken `json:"tokens"`
}

// toldToken is one token the teller verified: its SHA-256, subject and exp.
type toldToken struct {
	SHA256  string `json:"sha256"`
	Subject string `json:"subject"`
	Expires int64  `json:"expires"` // Unix seconds
}

// tokensTaken is the answer to POST /verified-tokens.
type tokensTaken struct {
	Taken int `json:"taken"` // the tokens taken; the others were expired
}

// tokenSharing is both ends of telling tokens: the teller's loop and the
// internal route's metrics.
type tokenSharing struct {
	voucher voucher
	old     sync.Map // names of peers without the route (an older version): told nothing
	told    *prometheus.CounterVec
	taken   *prometheus.CounterVec
}

func newTokenSharing(v voucher, reg prometheus.Registerer) *tokenSharing {
	f := promauto.With(reg)
	return &tokenSharing{voucher: v,
		told: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_tokens_told_total",
			Help: "Tokens verified here and told to a peer, by the peer's answer (taken, refused: other keys or a bad request, failed: no answer).",
		}, []string{"result"}),
		taken: f.NewCounterVec(prometheus.CounterOpts{
			Name: "bidgate_tokens_vouched_total",
			Help: "Tokens a peer told this node it verified, by result (taken; keys_differ: verified with other keys, issuer or audience; refused: expired, or the keys changed meanwhile).",
		}, []string{"result"}),
	}
}

// sumEncoding writes a SHA-256 or a fingerprint in a told token.
var sumEncoding = base64.RawURLEncoding

// ShareTokens tells the other gateway nodes, every tellEvery while there
// are some, the tokens this node verified for bidding, until ctx ends. It
// does nothing without a cluster secret or tokens to share.
func (s *Server) ShareTokens(ctx context.Context) error {
	if s.tokens == nil || s.forwarder == nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.tokens.voucher.VouchesReady():
		}
		if !retry.Sleep(ctx, tellEvery) {
			return nil
		}
		for {
			vouches := s.tokens.voucher.Vouches(maxToldTokens)
			if len(vouches) == 0 {
				break
			}
			s.tellPeers(vouches)
		}
	}
}

// tellPeers tells every verified gateway peer vouches, all at once.
func (s *Server) tellPeers(vouches []auth.Vouch) {
	keys := s.tokens.voucher.KeysFingerprint()
	in := toldTokens{Keys: sumEncoding.EncodeToString(keys[:])}
	for _, x := range vouches {
		if x.Keys == keys { // those verified before a change of keys are no one's business
			in.Tokens = append(in.Tokens, toldToken{SHA256: sumEncoding.EncodeToString(x.Sum[:]), Subject: strconv.FormatInt(x.UserID, 10),
				Expires: x.Expires.Unix()})
		}
	}
	if len(in.Tokens) == 0 {
		return
	}
	body, err := json.Marshal(in)
	if err != nil {
		s.log.Warn("tell peers the verified tokens: encode", "err", err)
		return
	}
	var wg sync.WaitGroup
	for _, m := range s.tokenPeers() {
		wg.Go(func() { s.tellPeer(m, body, len(in.Tokens)) })
	}
	wg.Wait()
}

// tokenPeers are the members to tell: the other gateways that proved the
// cluster secret and take told tokens.
func (s *Server) tokenPeers() []ring.Member {
	self := s.cfg.Cluster.Self().Name
	var peers []ring.Member
	for _, m := range s.cfg.Cluster.Members() {
		if _, old := s.tokens.old.Load(m.Name); m.Name != self && m.Verified && m.State == ring.StateAlive && m.HasRole(ring.RoleGateway) && !old {
			peers = append(peers, m)
		}
	}
	return peers
}

// tellPeer sends m the told tokens of body (n of them) in a signed request.
func (s *Server) tellPeer(m ring.Member, body []byte, n int) {
	result := "failed"
	defer func() { s.tokens.told.WithLabelValues(result).Add(float64(n)) }()
	resp, signed, err := s.forwarder.postInternal(m.InternalAddr, tokensPath, body)
	defer fasthttp.ReleaseResponse(resp)
	if err != nil {
		return
	}
	if !signed {
		if resp.StatusCode() == fasthttp.StatusNotFound && len(resp.Header.Peek(headerAnswerSig)) == 0 {
			s.tokens.old.Store(m.Name, true) // an older version, or a node that verifies no token
		}
		return
	}
	result = "refused"
	if resp.StatusCode() == fasthttp.StatusOK {
		result = "taken"
	}
}

// The internal endpoint's refusals of told tokens.
var (
	errBadTokens = refuse(fasthttp.StatusBadRequest, "bad_tokens",
		fmt.Sprintf("told tokens are 1 to %d, each a SHA-256 and a subject, with the keys' fingerprint (base64url, 32 bytes)", maxToldTokens))
	errKeysDiffer = refuse(fasthttp.StatusConflict, "keys_differ",
		"this node verifies tokens with other keys, issuer or audience: it takes no word for them")
)

// internalTokens serves POST /verified-tokens on the internal endpoint
// (signedInternal checked it): the tokens a peer verified, taken on its
// word for bids.
func (s *Server) internalTokens(ctx *fasthttp.RequestCtx) {
	var in toldTokens
	if err := decodeJSON(ctx, &in); err != nil {
		s.writeError(ctx, err)
		return
	}
	keys, ok := decodeSum(in.Keys)
	if !ok || len(in.Tokens) == 0 || len(in.Tokens) > maxToldTokens {
		s.writeError(ctx, errBadTokens)
		return
	}
	vouches := make([]auth.Vouch, len(in.Tokens))
	for i, t := range in.Tokens {
		sum, ok := decodeSum(t.SHA256)
		user, err := auth.ParseSubject(t.Subject)
		if !ok || err != nil || t.Expires <= 0 {
			s.writeError(ctx, errBadTokens)
			return
		}
		vouches[i] = auth.Vouch{Sum: sum, UserID: user, Expires: time.Unix(t.Expires, 0), Keys: keys}
	}
	if keys != s.tokens.voucher.KeysFingerprint() {
		s.tokens.taken.WithLabelValues("keys_differ").Add(float64(len(vouches)))
		s.writeError(ctx, errKeysDiffer)
		return
	}
	var out tokensTaken
	for _, x := range vouches {
		if s.tokens.voucher.Vouch(x) == nil {
			out.Taken++
		}
	}
	s.tokens.taken.WithLabelValues("taken").Add(float64(out.Taken))
	s.tokens.taken.WithLabelValues("refused").Add(float64(len(vouches) - out.Taken))
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// decodeSum reads a base64url SHA-256 (or fingerprint) of 32 bytes.
func decodeSum(s string) ([32]byte, bool) {
	var sum [32]byte
	if len(s) != sumEncoding.EncodedLen(len(sum)) {
		return sum, false
	}
	n, err := sumEncoding.Decode(sum[:], []byte(s))
	return sum, err == nil && n == len(sum)
}
