package gateway

import "github.com/valyala/fasthttp"

// Viewers is what the gateway needs from the fanout hub.
type Viewers interface {
	ServeWS(ctx *fasthttp.RequestCtx, auctionID int64)
}

// watch serves WS /ws/auctions/{id}: the fanout hub answers, on any node.
func (s *Server) watch(ctx *fasthttp.RequestCtx) {
	id, err := pathID(ctx, "id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.cfg.Viewers.ServeWS(ctx, id)
}
