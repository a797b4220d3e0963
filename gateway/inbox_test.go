package gateway

import (
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
	"bidgate/internal/problem"
	"bidgate/shard"
)

// recordingInbox notes who each /ws/me request was let in as, and refuses
// it (503): the fan-out's own tests cover what follows.
type recordingInbox struct {
	mu    sync.Mutex
	users []int64
}

func (r *recordingInbox) ServeWS(ctx *fasthttp.RequestCtx, user int64) {
	r.mu.Lock()
	r.users = append(r.users, user)
	r.mu.Unlock()
	problem.Write(ctx, problem.New(fasthttp.StatusServiceUnavailable, "unavailable", "recorded"))
}

func (r *recordingInbox) last() (int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.users) == 0 {
		return 0, 0
	}
	return r.users[len(r.users)-1], len(r.users)
}

// GET /ws/me lets in the token's subject, from Authorization or, for a
// browser, from Sec-WebSocket-Protocol; never a token in the URL, never
// without one, never without scope bid or sell.
func TestWSMeAuthenticates(t *testing.T) {
	inbox := &recordingInbox{}
	s, _ := startGateway(t, Config{Inbox: inbox}, shard.Config{RateLimit: -1, PromoteRate: -1})
	const user = 6_000_001
	tok := token(t, user, auth.ScopeBid)
	calls := 0
	for _, tc := range []struct {
		name   string
		path   string
		header []string
		status int
		code   string
		let    bool
	}{
		{"Authorization", "/ws/me", []string{"Authorization", "Bearer " + tok}, 503, "unavailable", true},
		{"the subprotocol", "/ws/me", []string{"Sec-WebSocket-Protocol", "bidgate.bearer, " + tok}, 503, "unavailable", true},
		{"a seller's token", "/ws/me", as(t, user, auth.ScopeSell), 503, "unavailable", true},
		{"no token", "/ws/me", nil, 401, "unauthenticated", false},
		{"a token in the URL", "/ws/me?access_token=" + tok, nil, 401, "unauthenticated", false},
		{"a subprotocol without the token", "/ws/me", []string{"Sec-WebSocket-Protocol", "bidgate.bearer"}, 401, "unauthenticated", false},
		{"an operator's token", "/ws/me", as(t, user, auth.ScopeOperator), 403, "forbidden", false},
		{"a bad token", "/ws/me", []string{"Authorization", "Bearer " + tok + "x"}, 401, "unauthenticated", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, s.do("GET", tc.path, nil, tc.header...), tc.status, tc.code)
			got, n := inbox.last()
			if tc.let {
				calls++
				if n != calls || got != user {
					t.Fatalf("the inbox saw %d requests, the last as %d; want %d, as %d", n, got, calls, user)
				}
			} else if n != calls {
				t.Fatalf("the inbox was asked (%d requests, want %d)", n, calls)
			}
		})
	}
}
