package gateway

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
)

// readyTimeout bounds the store calls of one readiness check.
const readyTimeout = 2 * time.Second

// errNotReady is the public readyz's answer: store addresses and driver
// errors are the admin endpoint's.
var errNotReady = refuse(fasthttp.StatusServiceUnavailable, "not_ready", "this node cannot decide bids right now")

// healthz serves GET /healthz: the process answers.
func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
}

// readyz serves GET /readyz on the public endpoint: ready or not, nothing
// more.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	if err := s.checkReady(ctx); err != nil {
		s.writeError(ctx, errNotReady)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
}

// readyzDetail serves GET /readyz on the admin endpoint: readyz with the
// reason, for operators.
func (s *Server) readyzDetail(ctx *fasthttp.RequestCtx) {
	if err := s.checkReady(ctx); err != nil {
		s.log.Warn("not ready", "err", err)
		s.writeError(ctx, refuse(fasthttp.StatusServiceUnavailable, "not_ready", err.Error()))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
}

// checkReady asks the stores whether they answer, within readyTimeout.
func (s *Server) checkReady(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	return s.ready(c)
}
