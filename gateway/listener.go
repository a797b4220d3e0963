package gateway

import (
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
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

func (l patientListener) Accept() (net.Conn, error) {
	var wait time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil || !recoverable(err) {
			return c, err
		}
		l.failures.Inc()
		l.logEvery.Do(func() {
			l.log.Warn("accepting connections failed; waiting and retrying (logged at most every 10s; see bidgate_accept_errors_total)", "err", err)
		})
		wait = min(max(2*wait, 5*time.Millisecond), time.Second)
		time.Sleep(wait)
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
