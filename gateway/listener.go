package gateway

import (
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"bidgate/internal/retry"
)

// patientListener keeps accepting through the errors a server recovers
// from by waiting: out of file descriptors or memory, a connection aborted
// before it was accepted. fasthttp's Serve returns on any accept error but
// a timeout, which would end the process; here the pending connections wait
// in the kernel's backlog until descriptors are free again.
type patientListener struct {
	net.Listener
	log      *slog.Logger
	failures prometheus.Counter
	logEvery *rate.Sometimes
}

// The wait between accept attempts that failed in a row: retry's back-off
// between these bounds. The first retry comes soon (a connection aborted
// before it was accepted is a one-off); a process out of descriptors gets
// an attempt about once a second.
const (
	acceptRetryMin = 5 * time.Millisecond
	acceptRetryMax = time.Second
)

// Accept returns the next connection, waiting out recoverable errors. It
// has no context to end a wait: a Close during one makes the attempt after
// it fail with a closed listener, which Accept returns.
func (l patientListener) Accept() (net.Conn, error) {
	backoff := retry.Backoff{Min: acceptRetryMin, Max: acceptRetryMax}
	for {
		c, err := l.Listener.Accept()
		if err == nil || !recoverable(err) {
			return c, err
		}
		l.failures.Inc()
		l.logEvery.Do(func() {
			l.log.Warn("accepting connections failed; waiting and retrying (logged at most every 10s; see bidgate_accept_errors_total)", "err", err)
		})
		time.Sleep(backoff.Next())
	}
}

func recoverable(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
