package gateway

import (
	"fmt"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"github.com/valyala/fasthttp/pprofhandler"

	"bidgate"
	"bidgate/gateway/openapi"
	"bidgate/internal/auth"
)

// publicRoutes is the clients' API: auctions and bids (unless OpsOnly), the
// viewers' WebSocket when there are Viewers, the probes and the API's
// contract. A route added here is added to gateway/openapi/public.json in
// the same change.
func (s *Server) publicRoutes() *router.Router {
	r := s.newRouter()
	if !s.cfg.OpsOnly {
		r.POST("/auctions", s.counted("create_auction", s.authorized(auth.ScopeSell, s.createAuction)))
		r.GET("/auctions/{id}", s.counted("get_auction", s.viewer(s.getAuction)))
		if s.lister != nil {
			r.GET("/auctions", s.counted("list_auctions", s.listAuctions))
			r.GET("/me/auctions", s.counted("my_auctions", s.authorized(auth.ScopeSell, s.myAuctions)))
		}
		r.POST("/auctions/{id}/bids", s.counted("place_bid", s.bidding(s.placeClientBid)))
		r.GET("/auctions/{id}/bids", s.counted("auction_bids", s.viewer(s.auctionBids)))
		r.GET("/me/bids", s.counted("my_bids", s.authorized(auth.ScopeBid, s.myBids)))
		r.GET("/me/notifications", s.counted("my_notifications", s.authorizedAny(noticeScopes, s.myNotifications)))
		r.POST("/me/notifications/read", s.counted("mark_notifications_read", s.authorizedAny(noticeScopes, s.markNotificationsRead)))
		r.POST("/auctions/{id}/promote", s.counted("promote", s.authorized(auth.ScopeOperator, s.promote)))
		r.POST("/auctions/{id}/cancel", s.counted("cancel_auction", s.authorized(auth.ScopeSell, s.cancelAuction)))
		r.POST("/auctions/{id}/buy-now", s.counted("buy_now", s.authorized(auth.ScopeBid, s.buyNow)))
	}
	if s.cfg.Viewers != nil && !s.cfg.OpsOnly {
		r.GET("/ws/auctions/{id}", s.counted("ws_auction", s.watch))
	}
	if s.cfg.Inbox != nil && !s.cfg.OpsOnly {
		r.GET("/ws/me", s.counted("ws_me", s.tokenFromSubprotocol(s.authorizedAny(noticeScopes, s.inbox))))
	}
	r.GET("/healthz", s.counted("healthz", s.healthz))
	r.GET("/readyz", s.counted("readyz", s.readyz))
	r.GET("/openapi.json", s.counted("openapi", document(openapi.Public())))
	return r
}

// internalRoutes takes only signed requests of other nodes: bids they
// forward, in batches or one a request (as nodes before batches send
// them), and the tokens they verified.
func (s *Server) internalRoutes() *router.Router {
	r := s.newRouter()
	r.POST("/auctions/{id}/bids", s.counted("internal_bid", s.signedInternal(s.internalBid)))
	r.POST(checkedPath, s.counted("internal_checked_bids", s.signedInternal(s.internalCheckedBids)))
	r.POST(legacyPath, s.counted("internal_bids", s.signedInternal(s.internalLegacyBids)))
	if s.tokens != nil {
		r.POST(tokensPath, s.counted("internal_tokens", s.signedInternal(s.internalTokens)))
	}
	return r
}

// adminRoutes is what operators read, private by default: the cluster's
// view, the detailed readiness, the metrics of reg, Go's profiler and this
// listener's contract (gateway/openapi/admin.json, changed with the routes).
func (s *Server) adminRoutes(reg *prometheus.Registry) *router.Router {
	r := s.newRouter()
	if s.cfg.Cluster != nil {
		r.GET("/cluster/members", s.counted("cluster_members", s.authorized(auth.ScopeOperator, s.clusterMembers)))
		r.GET("/cluster/owner/{id}", s.counted("cluster_owner", s.authorized(auth.ScopeOperator, s.clusterOwner)))
	}
	r.GET("/healthz", s.counted("healthz", s.healthz))
	r.GET("/readyz", s.counted("readyz_detail", s.readyzDetail))
	r.GET("/metrics", fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	r.GET("/debug/pprof/{profile:*}", s.counted("pprof", s.authorized(auth.ScopeOperator, profile)))
	r.GET("/openapi.json", s.counted("openapi", document(openapi.Admin())))
	return r
}

// profile serves Go's profiler (CPU, heap, goroutines): a profile of a node
// under real load is how its CPU per bid gets cut.
func profile(ctx *fasthttp.RequestCtx, _ auth.Principal) { pprofhandler.PprofHandler(ctx) }

// newRouter is a router that answers unknown routes, wrong methods and
// panics as problems, and never redirects: fasthttp builds a redirect's
// absolute URL from the request's Host header, which the client chooses.
func (s *Server) newRouter() *router.Router {
	r := router.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.NotFound = s.counted("not_found", func(ctx *fasthttp.RequestCtx) { s.writeError(ctx, errNoRoute) })
	r.MethodNotAllowed = s.counted("method_not_allowed", func(ctx *fasthttp.RequestCtx) { s.writeError(ctx, errMethodNotAllowed) })
	r.PanicHandler = s.answerPanic
	return r
}

// counted counts h's answers under a fixed route name.
func (s *Server) counted(route string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		s.metrics.countRequest(route, ctx.Response.StatusCode())
	}
}

// pathID reads a route parameter that is an id (bidgate.ParseID).
func pathID(ctx *fasthttp.RequestCtx, name string) (int64, error) {
	s, _ := ctx.UserValue(name).(string)
	id, err := bidgate.ParseID(s)
	if err != nil {
		return 0, bidgate.InvalidInput("invalid_id", fmt.Sprintf("%s: %v", name, err))
	}
	return id, nil
}
