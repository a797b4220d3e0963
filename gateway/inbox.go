package gateway

import (
	"bytes"
	"strconv"

	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

// Inbox is what the gateway needs from the notices' fan-out.
type Inbox interface {
	ServeWS(ctx *fasthttp.RequestCtx, userID int64)
}

// subprotocolBearer is the subprotocol a browser offers before its token
// (fanout.Subprotocol).
const subprotocolBearer = "bidgate.bearer"

// tokenFromSubprotocol lets a browser, which cannot set Authorization on a
// WebSocket, authenticate GET /ws/me with Sec-WebSocket-Protocol:
// bidgate.bearer, <token>: the token becomes the request's Authorization
// when it has none. A token is never read from the URL.
func (s *Server) tokenFromSubprotocol(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if len(ctx.Request.Header.Peek("Authorization")) == 0 {
			protocols := bytes.Split(ctx.Request.Header.Peek("Sec-WebSocket-Protocol"), []byte(","))
			for i := 0; i+1 < len(protocols); i++ {
				if string(bytes.TrimSpace(protocols[i])) == subprotocolBearer {
					ctx.Request.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(protocols[i+1])))
					break
				}
			}
		}
		h(ctx)
	}
}

// inbox serves GET /ws/me: the caller's notices as they are stored, on any
// node (the fan-out answers). With authentication off, ?userId= names the
// user.
func (s *Server) inbox(ctx *fasthttp.RequestCtx, p auth.Principal) {
	user := p.UserID
	if s.cfg.AuthOff {
		id, err := strconv.ParseInt(string(ctx.QueryArgs().Peek("userId")), 10, 64)
		if err != nil || id <= 0 {
			s.writeError(ctx, bidgate.InvalidInput("invalid_user_id", "userId must be a positive id"))
			return
		}
		ctx.QueryArgs().Del("userId")
		user = id
	}
	s.cfg.Inbox.ServeWS(ctx, user)
}
