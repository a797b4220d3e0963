package gateway

import (
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
)

// failingListener fails its first accepts with the errors given, then
// accepts one end of a pipe.
type failingListener struct {
	net.Listener
	errs []error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	c, _ := net.Pipe()
	return c, nil
}

// A patient listener waits out the errors a server recovers from (out of
// descriptors, an aborted connection), counting each, and returns any
// other error at once: fasthttp's Serve then ends, as it must on Close.
func TestPatientListenerAccept(t *testing.T) {
	tests := []struct {
		name     string
		errs     []error
		wantErr  error
		failures float64
	}{
		{"out of descriptors, then a connection", []error{syscall.EMFILE, syscall.EMFILE, syscall.ENFILE}, nil, 3},
		{"an aborted connection, then a connection", []error{syscall.ECONNABORTED}, nil, 1},
		{"closed", []error{syscall.EMFILE, net.ErrClosed}, net.ErrClosed, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			failures := prometheus.NewCounter(prometheus.CounterOpts{Name: "accept_errors_total"})
			l := patientListener{Listener: &failingListener{errs: tc.errs}, log: slog.New(slog.DiscardHandler),
				failures: failures, logEvery: &rate.Sometimes{Interval: time.Minute}}
			c, err := l.Accept()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Accept: %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if got := testutil.ToFloat64(failures); got != tc.failures {
				t.Fatalf("%v accept errors counted, want %v", got, tc.failures)
			}
		})
	}
}
