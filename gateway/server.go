// Package gateway is bidgate's HTTP API on fasthttp: it validates requests,
// hands them to the shard and writes the answers, errors as
// application/problem+json.
package gateway

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/go-json-experiment/json"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"github.com/valyala/fasthttp/pprofhandler"
	"golang.org/x/time/rate"

	"bidgate"
	"bidgate/internal/auth"
	"bidgate/internal/problem"
)

// Auctions is what the gateway needs from the shard.
type Auctions interface {
	CreateAuction(ctx context.Context, n bidgate.NewAuction) (bidgate.Auction, error)
	Auction(ctx context.Context, id int64) (bidgate.Auction, error)
	PlaceBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error)
	Promote(ctx context.Context, id int64, trigger string) (bidgate.Auction, error)
	Cancel(ctx context.Context, id, seller int64) (bidgate.Auction, error)
}

// Config tunes the HTTP server. Zero values take the defaults.
type Config struct {
	MaxBodyBytes   int           // default 64 KiB
	RequestTimeout time.Duration // budget of one request's store calls; default 5s
	ReadTimeout    time.Duration // default 10s
	WriteTimeout   time.Duration // default 10s
	IdleTimeout    time.Duration // keep-alive idle time; default 60s
	// MaxConns bounds the connections served at once (beyond it a new one
	// gets a 503 and is closed); default 10000. MaxConnsPerIP bounds those
	// of one client address; default 1024.
	MaxConns      int
	MaxConnsPerIP int
	// Auth verifies the bearer tokens that creating auctions, bidding and
	// operator routes need. Nil accepts no token: those routes answer 401.
	Auth Authenticator
	// AuthOff skips authentication: every caller may do anything, as the
	// user the request body names (development only).
	AuthOff bool
	// AuthFailureRate and AuthFailureBurst bound failed authentications per
	// client address (then 429); default 20/s with a burst of 40.
	AuthFailureRate  float64
	AuthFailureBurst int
	// OpsOnly serves only /healthz, /readyz and /metrics: for processes that
	// run other roles than the gateway.
	OpsOnly bool

	// NodeID names this node in the X-Bidgate-Node header of bid answers.
	NodeID string
	// Cluster, when set, places auctions on nodes: a bid for an auction
	// another node owns is forwarded to that node's internal endpoint,
	// signed with ClusterSecret.
	Cluster        Cluster
	ClusterSecret  []byte
	ForwardTimeout time.Duration // default 2s

	// Viewers, when set, serves WS /ws/auctions/{id} on every node.
	Viewers Viewers
}

// Viewers is what the gateway needs from the fanout hub.
type Viewers interface {
	ServeWS(ctx *fasthttp.RequestCtx, auctionID int64)
}

// DefaultConfig holds the defaults: the values NewServer gives zero fields
// and the command line's flag defaults.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 64 << 10, RequestTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second, ForwardTimeout: 2 * time.Second,
		MaxConns: 10000, MaxConnsPerIP: 1024, AuthFailureRate: 20, AuthFailureBurst: 40}
}

func (c *Config) setDefaults() {
	d := DefaultConfig()
	for _, f := range []struct{ v, d *time.Duration }{{&c.RequestTimeout, &d.RequestTimeout},
		{&c.ReadTimeout, &d.ReadTimeout}, {&c.WriteTimeout, &d.WriteTimeout}, {&c.IdleTimeout, &d.IdleTimeout},
		{&c.ForwardTimeout, &d.ForwardTimeout}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *int }{{&c.MaxBodyBytes, &d.MaxBodyBytes}, {&c.MaxConns, &d.MaxConns},
		{&c.MaxConnsPerIP, &d.MaxConnsPerIP}, {&c.AuthFailureBurst, &d.AuthFailureBurst}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if c.AuthFailureRate <= 0 {
		c.AuthFailureRate = d.AuthFailureRate
	}
}

// Server serves the API.
type Server struct {
	cfg          Config
	auctions     Auctions
	ready        func(context.Context) error
	log          *slog.Logger
	metrics      *metrics
	forward      *forwarder // nil on a single node
	signer       *signer
	authFailures *failureLimiter
	http         *fasthttp.Server
	internal     *fasthttp.Server
	admin        *fasthttp.Server
}

// New builds a Server. ready reports whether the stores answer (GET /readyz);
// metrics are registered on reg and served from it at GET /metrics on the
// admin endpoint.
func New(cfg Config, auctions Auctions, ready func(context.Context) error, reg *prometheus.Registry, log *slog.Logger) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, auctions: auctions, ready: ready, log: log, metrics: newMetrics(reg),
		authFailures: newFailureLimiter(cfg.AuthFailureRate, cfg.AuthFailureBurst), signer: newSigner(cfg.ClusterSecret)}
	if cfg.Cluster != nil {
		s.forward = newForwarder(cfg.Cluster, s.signer, cfg.ForwardTimeout, reg)
	}

	r := newRouter()
	if !cfg.OpsOnly {
		r.POST("/auctions", s.route("create_auction", s.authorized(auth.ScopeSell, s.createAuction)))
		r.GET("/auctions/{id}", s.route("get_auction", s.getAuction))
		r.POST("/auctions/{id}/bids", s.route("place_bid", s.authorized(auth.ScopeBid, s.placeClientBid)))
		r.POST("/auctions/{id}/promote", s.route("promote", s.authorized(auth.ScopeOperator, s.promote)))
		r.POST("/auctions/{id}/cancel", s.route("cancel_auction", s.authorized(auth.ScopeSell, s.cancelAuction)))
		r.POST("/auctions/{id}/buy-now", s.route("buy_now", s.authorized(auth.ScopeBid, s.buyNow)))
	}
	if cfg.Viewers != nil && !cfg.OpsOnly {
		r.GET("/ws/auctions/{id}", s.route("ws_auction", s.watch))
	}
	r.GET("/healthz", s.route("healthz", s.healthz))
	r.GET("/readyz", s.route("readyz", s.readyz))
	r.NotFound = s.route("not_found", func(ctx *fasthttp.RequestCtx) {
		problem.Write(ctx, problem.New(fasthttp.StatusNotFound, "route_not_found", "no such route"))
	})
	r.MethodNotAllowed = s.route("method_not_allowed", func(ctx *fasthttp.RequestCtx) {
		problem.Write(ctx, problem.New(fasthttp.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route"))
	})
	r.PanicHandler = s.recovered

	s.http = s.newHTTPServer(r.Handler)

	// The internal endpoint takes only signed, forwarded bids.
	in := newRouter()
	in.POST("/auctions/{id}/bids", s.route("internal_bid", s.internalBid))
	in.NotFound = r.NotFound
	in.MethodNotAllowed = r.MethodNotAllowed
	in.PanicHandler = s.recovered
	s.internal = s.newHTTPServer(in.Handler)

	// The admin endpoint: what operators read, private by default.
	ad := newRouter()
	if cfg.Cluster != nil {
		ad.GET("/cluster/members", s.route("cluster_members", s.authorized(auth.ScopeOperator, s.clusterMembers)))
		ad.GET("/cluster/owner/{id}", s.route("cluster_owner", s.authorized(auth.ScopeOperator, s.clusterOwner)))
	}
	ad.GET("/healthz", s.route("healthz", s.healthz))
	ad.GET("/readyz", s.route("readyz_detail", s.readyzDetail))
	ad.GET("/metrics", fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	// Go's profiler (CPU, heap, goroutines), for operators: a profile of a
	// node under real load is how its CPU per bid gets cut.
	ad.GET("/debug/pprof/{profile:*}", s.route("pprof", s.authorized(auth.ScopeOperator, func(ctx *fasthttp.RequestCtx, _ auth.Principal) { pprofhandler.PprofHandler(ctx) })))
	ad.NotFound = r.NotFound
	ad.MethodNotAllowed = r.MethodNotAllowed
	ad.PanicHandler = s.recovered
	s.admin = s.newHTTPServer(ad.Handler)
	return s
}

// newRouter is a router that never redirects: fasthttp builds a redirect's
// absolute URL from the request's Host header, which the client chooses.
func newRouter() *router.Router {
	r := router.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	return r
}

func (s *Server) newHTTPServer(h fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:            h,
		Name:               "bidgate",
		MaxRequestBodySize: s.cfg.MaxBodyBytes,
		ReadTimeout:        s.cfg.ReadTimeout,
		WriteTimeout:       s.cfg.WriteTimeout,
		IdleTimeout:        s.cfg.IdleTimeout,
		ErrorHandler:       s.transportError,
		Concurrency:        s.cfg.MaxConns,
		MaxConnsPerIP:      s.cfg.MaxConnsPerIP,
		Logger:             newSlogPrinter(s.log),
	}
}

// Serve answers the public API on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.http.Serve(s.patient(ln)) }

// ServeInternal answers forwarded bids on ln until Shutdown.
func (s *Server) ServeInternal(ln net.Listener) error { return s.internal.Serve(s.patient(ln)) }

// ServeAdmin answers the operators' routes (/metrics, /cluster/*, the
// detailed /readyz) on ln until Shutdown.
func (s *Server) ServeAdmin(ln net.Listener) error { return s.admin.Serve(s.patient(ln)) }

func (s *Server) patient(ln net.Listener) net.Listener {
	return patientListener{Listener: ln, log: s.log, failures: s.metrics.acceptErrors,
		logEvery: &rate.Sometimes{Interval: 10 * time.Second}}
}

// Shutdown stops accepting connections and waits for in-flight requests,
// on both endpoints.
func (s *Server) Shutdown(ctx context.Context) error {
	return errors.Join(s.http.ShutdownWithContext(ctx), s.internal.ShutdownWithContext(ctx), s.admin.ShutdownWithContext(ctx))
}

// route counts the request under a fixed route name.
func (s *Server) route(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		s.metrics.countRequest(name, ctx.Response.StatusCode())
	}
}

func (s *Server) recovered(ctx *fasthttp.RequestCtx, v any) {
	s.metrics.panics.Inc()
	s.log.Error("panic serving request", "method", string(ctx.Method()), "path", string(ctx.Path()),
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	ctx.Response.Reset()
	problem.Write(ctx, problem.New(fasthttp.StatusInternalServerError, "internal", "internal error"))
}

// transportError answers what fasthttp rejects before any handler runs,
// such as an oversized body or a malformed request, with a fixed message:
// the request's bytes (its headers, tokens, cookies) are never echoed.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		problem.Write(ctx, problem.New(fasthttp.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("request body exceeds %d bytes", s.cfg.MaxBodyBytes)))
		return
	}
	problem.Write(ctx, problem.New(fasthttp.StatusBadRequest, "malformed_request", "the request is not valid HTTP/1.1"))
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
}

// readyz says ready or not, nothing more: store addresses and driver
// errors are the admin endpoint's.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.ready(c); err != nil {
		problem.Write(ctx, problem.New(fasthttp.StatusServiceUnavailable, "not_ready", "this node cannot decide bids right now"))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
}

// readyzDetail is readyz with the reason, for operators.
func (s *Server) readyzDetail(ctx *fasthttp.RequestCtx) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.ready(c); err != nil {
		s.log.Warn("not ready", "err", err)
		problem.Write(ctx, problem.New(fasthttp.StatusServiceUnavailable, "not_ready", err.Error()))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
}

// requestContext bounds the store calls of one request. It does not derive
// from the fasthttp context, which is cancelled as soon as the server starts
// shutting down: in-flight bids are finished, not abandoned.
func (s *Server) requestContext(*fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := stdjson.Marshal(v)
	if err != nil {
		panic(err) // only our own types are written
	}
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}

// decodeJSON reads exactly one JSON object, strictly: unknown, duplicate
// or case-mismatched member names and invalid UTF-8 are malformed_json (a
// lenient decoder lets {"amount":1,"amount":2100} bid 2100). An amount that
// does not parse is invalid_amount. The Content-Type is not checked: the
// body is JSON whatever a client labels it.
func decodeJSON(ctx *fasthttp.RequestCtx, v any) error {
	body := ctx.PostBody()
	if len(bytes.TrimSpace(body)) == 0 {
		return bidgate.InvalidInput("malformed_json", "request body is empty")
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var semantic *json.SemanticError
	if errors.As(err, &semantic) && moneyMembers[string(semantic.JSONPointer)] {
		return bidgate.InvalidInput("invalid_amount", fmt.Sprintf("%s: %v", strings.TrimPrefix(string(semantic.JSONPointer), "/"), semantic.Err))
	}
	return bidgate.InvalidInput("malformed_json", "request body: "+err.Error())
}

// moneyMembers are the request members that hold amounts.
var moneyMembers = map[string]bool{"/amount": true, "/startPrice": true, "/minIncrement": true, "/reservePrice": true,
	"/maxAmount": true, "/buyNowPrice": true}

// pathID reads a route parameter that is an id (bidgate.ParseID).
func pathID(ctx *fasthttp.RequestCtx, name string) (int64, error) {
	s, _ := ctx.UserValue(name).(string)
	id, err := bidgate.ParseID(s)
	if err != nil {
		return 0, bidgate.InvalidInput("invalid_id", fmt.Sprintf("%s: %v", name, err))
	}
	return id, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// slogPrinter lets fasthttp log through slog, without what clients sent
// and without flooding: fasthttp's connection errors quote the request's
// bytes (tokens and cookies included), so they are cut off, and lines come
// at most every 10 s, with a count of those left out.
type slogPrinter struct {
	log  *slog.Logger
	mu   *sync.Mutex
	last *time.Time
	left *int
}

func newSlogPrinter(log *slog.Logger) slogPrinter {
	return slogPrinter{log: log, mu: new(sync.Mutex), last: new(time.Time), left: new(int)}
}

func (p slogPrinter) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(*p.last) >= 10*time.Second {
		p.log.Warn("fasthttp: "+scrub(fmt.Sprintf(format, args...)), "not_logged", *p.left)
		*p.last, *p.left = now, 0
		return
	}
	*p.left++
}

// scrub drops the quoted request bytes fasthttp appends to parse errors and
// bounds the length.
func scrub(msg string) string {
	for _, cut := range []string{"contents:", "buffer size="} {
		if i := strings.Index(strings.ToLower(msg), cut); i >= 0 {
			msg = msg[:i] + "[request bytes not logged]"
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return strings.ToValidUTF8(msg, "?")
}
