// Package gateway is bidgate's HTTP API on fasthttp: it validates requests,
// hands them to the shard and writes the answers, errors as
// application/problem+json.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"bidgate"
	"bidgate/internal/cursor"
)

// Auctions is what the gateway needs from the shard.
type Auctions interface {
	CreateAuction(ctx context.Context, n bidgate.NewAuction) (bidgate.Auction, error)
	Auction(ctx context.Context, id int64) (bidgate.Auction, error)
	PlaceBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error)
	Promote(ctx context.Context, id int64, trigger string) (bidgate.Auction, error)
	Cancel(ctx context.Context, id, seller int64) (bidgate.Auction, error)
}

// Server serves the API on three endpoints: the public one (clients), the
// internal one (bids forwarded by other nodes) and the admin one
// (operators).
type Server struct {
	cfg          Config
	auctions     Auctions
	rendered     rendered // encoded GET answers, by ETag
	reads        Reader
	lister       Lister         // nil: no list routes
	cursors      *cursor.Sealer // of every list's page cursors
	history      History        // nil: the history routes answer 404
	notices      Notifications  // nil: the notification routes answer 404
	ready        func(context.Context) error
	log          *slog.Logger
	metrics      *metrics
	forwarder    *forwarder    // nil on a single node
	deciders     deciders      // of forwarded batches' bids
	tokens       *tokenSharing // nil unless the nodes share verified tokens
	signer       *signer
	authFailures *failureLimiter
	public       *fasthttp.Server
	internal     *fasthttp.Server
	admin        *fasthttp.Server

	// fasthttp's Shutdown does nothing to a listener its Serve has not
	// taken yet, and that Serve would then run for ever: Shutdown also
	// closes the listeners handed to Serve, and a Serve after it returns.
	mu        sync.Mutex
	shutDown  bool
	listeners []net.Listener
}

// New builds a Server. ready reports whether the stores answer (GET /readyz);
// metrics are registered on reg and served from it at GET /metrics on the
// admin endpoint.
func New(cfg Config, auctions Auctions, ready func(context.Context) error, reg *prometheus.Registry, log *slog.Logger) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, auctions: auctions, ready: ready, log: log, metrics: newMetrics(reg), deciders: newDeciders(),
		authFailures: newFailureLimiter(cfg.AuthFailureRate, cfg.AuthFailureBurst), signer: newSigner(cfg.ClusterSecret, cfg.ClusterSecretPrevious)}
	countSignatureChecks(reg, cfg.Auth)
	s.reads = cfg.Reads
	if r, ok := auctions.(Reader); ok && s.reads == nil {
		s.reads = r // the shard: it reads past its read replica for minSeq
	}
	if s.reads == nil {
		s.reads = direct{auctions}
	}
	s.lister, _ = auctions.(Lister)
	s.cursors = cursor.New(cfg.ClusterSecret, cfg.ClusterSecretPrevious)
	s.history, _ = auctions.(History)
	s.notices, _ = auctions.(Notifications)
	if cfg.Cluster != nil {
		s.forwarder = newForwarder(cfg.Cluster, s.signer, cfg.ForwardTimeout, reg)
		if v, ok := cfg.Auth.(voucher); ok && !cfg.AuthOff && len(s.signer.secrets) > 0 {
			s.tokens = newTokenSharing(v, reg)
		}
	}
	s.public = s.newHTTPServer(s.publicRoutes().Handler)
	s.internal = s.newHTTPServer(s.internalRoutes().Handler)
	s.admin = s.newHTTPServer(s.adminRoutes(reg).Handler)
	return s
}

func (s *Server) newHTTPServer(h fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:            h,
		Name:               "bidgate",
		MaxRequestBodySize: s.cfg.MaxBodyBytes,
		ReadTimeout:        s.cfg.ReadTimeout,
		WriteTimeout:       s.cfg.WriteTimeout,
		IdleTimeout:        s.cfg.IdleTimeout,
		ErrorHandler:       s.answerTransportError,
		Concurrency:        s.cfg.MaxConns,
		MaxConnsPerIP:      s.cfg.MaxConnsPerIP,
		// Near the cap, idle keep-alive connections make room first.
		ConnState: newIdleReleaser(s.cfg.MaxConns, s.metrics.idleReleased).connState,
		// The logger prints no byte of a request, only a kind and the peer,
		// and counts every error: it may see them all.
		Logger:                newFasthttpLogger(s.log, s.metrics.transportErrors),
		LogAllErrors:          true,
		SecureErrorLogMessage: true,
	}
}

// Serve answers the public API on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.serve(s.public, ln) }

// ServeInternal answers forwarded bids on ln until Shutdown.
func (s *Server) ServeInternal(ln net.Listener) error { return s.serve(s.internal, ln) }

// ServeAdmin answers the operators' routes (/metrics, /cluster/*, the
// detailed /readyz) on ln until Shutdown.
func (s *Server) ServeAdmin(ln net.Listener) error { return s.serve(s.admin, ln) }

// serve runs srv on ln, unless Shutdown came first.
func (s *Server) serve(srv *fasthttp.Server, ln net.Listener) error {
	s.mu.Lock()
	if s.shutDown {
		s.mu.Unlock()
		return closeListener(ln)
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	return srv.Serve(s.patient(ln))
}

// closeListener closes ln; closed already is no error.
func closeListener(ln net.Listener) error {
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

func (s *Server) patient(ln net.Listener) net.Listener {
	return patientListener{Listener: ln, log: s.log, failures: s.metrics.acceptErrors,
		logEvery: &rate.Sometimes{Interval: 10 * time.Second}}
}

// Shutdown stops accepting connections and waits for in-flight requests,
// on every endpoint.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutDown = true
	listeners := s.listeners
	s.mu.Unlock()
	err := errors.Join(s.public.ShutdownWithContext(ctx), s.internal.ShutdownWithContext(ctx), s.admin.ShutdownWithContext(ctx))
	s.deciders.release()
	for _, ln := range listeners {
		err = errors.Join(err, closeListener(ln))
	}
	return err
}

// requestContext bounds the store calls of one request. It does not derive
// from the fasthttp context, which is cancelled as soon as the server starts
// shutting down: in-flight bids are finished, not abandoned.
func (s *Server) requestContext(*fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
}
