package gateway

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// fasthttpLogInterval is the least time between two lines fasthttp logs.
const fasthttpLogInterval = 10 * time.Second

// The kinds of transport error: what the log and
// bidgate_http_transport_errors_total say about a connection fasthttp gave
// up on. The set is fixed; nothing else about the request is told.
const (
	kindRequestLine    = "malformed_request_line" // no method, URI or HTTP version fasthttp accepts
	kindHeader         = "malformed_header"       // a header line, Content-Length or Transfer-Encoding it refuses
	kindBody           = "malformed_body"         // a bad chunk or trailer
	kindHeaderTooLarge = "header_too_large"
	kindBodyTooLarge   = "body_too_large"
	kindTimeout        = "timeout"          // the request did not arrive within ReadTimeout
	kindReset          = "connection_reset" // the client went away mid-request
	kindTLS            = "tls"
	kindConnLimit      = "connection_limit" // MaxConns or MaxConnsPerIP reached
	kindAccept         = "accept"           // accepting a connection failed
	kindOther          = "other"
)

// transportKinds lists every kind, for the metric's labels.
var transportKinds = []string{kindRequestLine, kindHeader, kindBody, kindHeaderTooLarge, kindBodyTooLarge,
	kindTimeout, kindReset, kindTLS, kindConnLimit, kindAccept, kindOther}

// fasthttpLogger is fasthttp's Logger. It logs by allow-list: fasthttp's
// lines quote what the client sent (the request line, headers with their
// tokens and cookies, in forms no scrubber can list), so a line is never
// formatted. Only its kind (one of a fixed set) and the peer's address are
// logged, at most one line per interval with a count of those left out;
// every one is counted in bidgate_http_transport_errors_total{kind}.
type fasthttpLogger struct {
	log      *slog.Logger
	counts   *prometheus.CounterVec
	interval time.Duration

	mu         sync.Mutex
	lastLogged time.Time
	notLogged  int // lines left out since lastLogged
}

func newFasthttpLogger(log *slog.Logger, counts *prometheus.CounterVec) *fasthttpLogger {
	return &fasthttpLogger{log: log, counts: counts, interval: fasthttpLogInterval}
}

// Printf logs the kind and peer of one of fasthttp's lines, unless one was
// logged less than the interval ago. format and args are read, never
// printed.
func (l *fasthttpLogger) Printf(format string, args ...any) {
	kind, peer := classifyLine(format, args)
	l.counts.WithLabelValues(kind).Inc()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.lastLogged) >= l.interval {
		l.log.Warn("http transport error (see bidgate_http_transport_errors_total)", "kind", kind, "peer", peer,
			"not_logged", l.notLogged)
		l.lastLogged, l.notLogged = now, 0
		return
	}
	l.notLogged++
}

// classifyLine says what one of fasthttp's log lines is about, from its
// format string (a constant of fasthttp's) and the types of its arguments.
// peer is the client's address when the line names one, else "".
func classifyLine(format string, args []any) (kind, peer string) {
	switch {
	case strings.HasPrefix(format, "error when serving connection") && len(args) == 3:
		err, _ := args[2].(error)
		return transportErrorKind(err), address(args[1])
	case strings.Contains(format, "MaxConnsPerIP") && len(args) > 0:
		return kindConnLimit, address(args[0])
	case strings.Contains(format, "concurrent connections"):
		return kindConnLimit, ""
	case strings.Contains(format, "accepting new connections"):
		return kindAccept, ""
	}
	return kindOther, ""
}

// address is v's text when it is an address: the peer of a connection or
// the IP of a client.
func address(v any) string {
	switch a := v.(type) {
	case net.Addr:
		return a.String()
	case net.IP:
		return a.String()
	}
	return ""
}

// transportErrorKind sorts an error fasthttp met while reading a request
// into one of the fixed kinds. The error's text, which may quote the
// request, is only searched for fasthttp's own wording; whatever a client
// puts in it can at most pick another kind of the set.
func transportErrorKind(err error) string {
	var (
		netErr    net.Error
		smallBuf  *fasthttp.ErrSmallBuffer
		badChunk  fasthttp.ErrBrokenChunk
		tlsRecord tls.RecordHeaderError
		tlsAlert  tls.AlertError
	)
	switch {
	case err == nil:
		return kindOther
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return kindBodyTooLarge
	case errors.As(err, &smallBuf), errors.Is(err, fasthttp.ErrSmallReadBuffer):
		return kindHeaderTooLarge
	case errors.As(err, &badChunk), errors.Is(err, fasthttp.ErrBadTrailer):
		return kindBody
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return kindTimeout
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return kindReset
	case errors.As(err, &tlsRecord), errors.As(err, &tlsAlert):
		return kindTLS
	}
	msg := strings.ToLower(err.Error())
	for _, k := range []struct {
		kind  string
		words []string
	}{
		{kindRequestLine, []string{"request method", "first line of request", "http version", "request uri", "requesturi", "request line"}},
		{kindHeader, []string{"request headers"}},
		{kindBody, []string{"chunk", "hex number", "trailer", "body"}},
		{kindHeader, []string{"header", "content-length", "transfer-encoding", "host"}},
		{kindTLS, []string{"tls:"}},
		{kindReset, []string{"reset by peer", "broken pipe", "unexpected eof"}},
		{kindTimeout, []string{"timeout"}},
	} {
		for _, w := range k.words {
			if strings.Contains(msg, w) {
				return k.kind
			}
		}
	}
	return kindOther
}
