package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
)

// readyTimeout is the budget of one readiness answer (a probe's timeout is
// commonly 2 s); the store checks get readyCheckTimeout of it, and the rest
// is left to write the answer.
const (
	readyTimeout      = 2 * time.Second
	readyCheckTimeout = readyTimeout * 3 / 4
)

// errReadyTimedOut: the store checks did not end within readyCheckTimeout.
var errReadyTimedOut = errors.New("the store checks did not answer in time")

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
	if err := s.checkReady(); err != nil {
		s.writeError(ctx, errNotReady)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
}

// readyzDetail serves GET /readyz on the admin endpoint: readyz with the
// reason, for operators.
func (s *Server) readyzDetail(ctx *fasthttp.RequestCtx) {
	if err := s.checkReady(); err != nil {
		s.log.Warn("not ready", "err", err)
		s.writeError(ctx, refuse(fasthttp.StatusServiceUnavailable, "not_ready", err.Error()))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ready"})
}

// checkReady asks the stores whether they answer, and returns by
// readyCheckTimeout whatever they do: a check that does not heed its
// context's deadline is not waited for. Its context is not the request's:
// fasthttp reuses a RequestCtx once the handler returns, while the
// deadline's timer may still be reading it.
func (s *Server) checkReady() error {
	c, cancel := context.WithTimeout(context.Background(), readyCheckTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.ready(c) }()
	select {
	case err := <-done:
		return err
	case <-c.Done():
		return fmt.Errorf("%w within %v", errReadyTimedOut, readyCheckTimeout)
	}
}
