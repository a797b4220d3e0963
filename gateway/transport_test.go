package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A request malformed at the HTTP level gets a fixed 400: neither the
// answer nor the log holds its bytes (a bearer token, a cookie), and a
// flood of them is a few log lines, not one each.
func TestMalformedRequestsAreNotEchoed(t *testing.T) {
	const secret = "s3cr3t-t0ken-of-the-client"
	var logs syncBuffer
	_, addr := rawServer(t, Config{}, slog.NewTextHandler(&logs, nil))

	requests := []string{
		"GET /auctions/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nCookie: s=" + secret + "\r\nContent-Length: abc\r\n\r\n",
		"POST /auctions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nTransfer-Encoding: chunked\r\n\r\nzz" + secret + "\r\n",
		"GET /" + secret + " HTTP/9.9\r\nHost: x\r\n\r\n",
		"G\x00T / HTTP/1.1\r\nAuthorization: Bearer " + secret + "\r\n\r\n",
	}
	for range 20 {
		for _, raw := range requests {
			answer := send(t, addr, raw)
			if strings.Contains(answer, secret) {
				t.Fatalf("the answer to a malformed request echoes it:\n%s", answer)
			}
			if !strings.HasPrefix(answer, "HTTP/1.1 400") && !strings.HasPrefix(answer, "HTTP/1.1 404") && answer != "" {
				t.Fatalf("answer to %q:\n%s", raw, answer)
			}
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("the log holds the request's bytes:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "\n"); n > 4 {
		t.Fatalf("%d log lines for 80 malformed requests, want a few:\n%s", n, logs.String())
	}
}

// send writes raw on a new connection and returns what comes back until
// the server closes it or a second passes.
func send(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			return out.String()
		}
	}
}

// A client address holds at most MaxConnsPerIP connections (the next is
// answered 429 and closed) and the node at most MaxConns (503); a slot is
// free again once a connection closes. The node's cap is reached with
// requests in progress: idle connections would be released to make room
// (TestIdleConnectionsReleasedNearTheCap).
func TestConnectionCaps(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    Config
		hold   string // what each held connection sends
		status string
	}{
		{"per address", Config{MaxConnsPerIP: 2}, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 429"},
		{"per node", Config{MaxConns: 2}, "GET /healthz HTTP/1.1\r\nHost: x\r\n", "HTTP/1.1 503"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serveWith(t, c.cfg, nil, func(context.Context) error { return nil })
			addr := strings.TrimPrefix(s.base, "http://")
			var held []net.Conn
			for range 2 {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, conn)
				if _, err := io.WriteString(conn, c.hold); err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(c.hold, "\r\n\r\n") {
					continue // a request in progress: no answer yet
				}
				if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
					t.Fatalf("held connection: %q %v", line, err)
				}
			}
			if answer := send(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); !strings.HasPrefix(answer, c.status) {
				t.Fatalf("a third connection: %q, want %s", answer, c.status)
			}
			if err := held[0].Close(); err != nil {
				t.Fatal(err)
			}
			// fasthttp frees the slot some time after the socket closes and
			// tells nobody: ask until it has.
			eventually(t, 10*time.Second, "a slot free after a connection closed", func() error {
				answer := send(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				if !strings.HasPrefix(answer, "HTTP/1.1 200") {
					return fmt.Errorf("answered %q", strings.SplitN(answer, "\r\n", 2)[0])
				}
				return nil
			})
			if err := held[1].Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// No answer is a redirect, so none points where a Host header says: a
// trailing slash or a wrongly cased path is simply not found.
func TestNoRedirectFromTheHostHeader(t *testing.T) {
	s, _ := startServer(t)
	id := s.createAuction(validAuction())
	for _, path := range []string{fmt.Sprintf("/auctions/%d/", id), fmt.Sprintf("/AUCTIONS/%d", id), "/healthz/", "//healthz"} {
		answer := send(t, strings.TrimPrefix(s.base, "http://"), "GET "+path+" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(answer, "HTTP/1.1 404") || strings.Contains(answer, "evil.example") {
			t.Fatalf("GET %s with Host evil.example:\n%s", path, answer)
		}
	}
}
