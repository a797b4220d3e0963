package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Connections left idle on keep-alive cannot hold a node's slots: once
// open connections pass 90% of MaxConns the longest idle one is closed, so
// a new client is served instead of answered 503, and a request in
// progress is never cut.
func TestIdleConnectionsReleasedNearTheCap(t *testing.T) {
	const maxConns = 10
	srv, addr := rawServer(t, Config{MaxConns: maxConns, IdleTimeout: time.Hour, ReadTimeout: time.Minute}, slog.DiscardHandler)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// One connection in the middle of a request, then idle keep-alive ones
	// up to the cap.
	busy := dial()
	if _, err := io.WriteString(busy, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	var idle []net.Conn
	for range maxConns - 1 {
		c := dial()
		if status := get(t, c, bufio.NewReader(c), ""); status != 200 {
			t.Fatalf("idle connection's request: %d", status)
		}
		idle = append(idle, c)
	}

	// The tenth connection passed the threshold: an idle one (the longest
	// idle as the server saw it, which need not be the first: a connection
	// turns idle only after its answer is sent) is closed without an answer.
	closed := make(chan int, len(idle))
	for i, c := range idle {
		go func() {
			if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				return
			}
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				closed <- i
			}
		}()
	}
	select {
	case <-closed:
	case <-time.After(6 * time.Second):
		t.Fatal("no idle connection was closed at the cap")
	}
	// A new client is served. (fasthttp frees the closed connection's
	// worker just after the socket closes and tells nobody: ask until it
	// has.)
	eventually(t, 5*time.Second, "a new client served at the cap", func() error {
		c := dial()
		if status := get(t, c, bufio.NewReader(c), "Connection: close\r\n"); status != 200 {
			return fmt.Errorf("answered %d", status)
		}
		return nil
	})
	// The request in progress was not cut.
	if _, err := io.WriteString(busy, "\r\n"); err != nil {
		t.Fatal(err)
	}
	if status := readStatus(t, bufio.NewReader(busy)); status != 200 {
		t.Fatalf("the request in progress: %d", status)
	}
	if n := testutil.ToFloat64(srv.metrics.idleReleased); n < 1 {
		t.Fatalf("bidgate_http_idle_connections_released_total = %v, want at least 1", n)
	}
}

// get sends GET /healthz with the extra header lines on c and returns the
// answer's status, reading the whole answer so that c stays usable.
func get(t *testing.T, c net.Conn, r *bufio.Reader, header string) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+header+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return readStatus(t, r)
}

func readStatus(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		if strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset") {
			return 0 // closed without an answer
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}
