package gateway

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rawServer serves the public API with cfg on a loopback port, logging to
// log, and returns it and its address.
func rawServer(t *testing.T, cfg Config, log slog.Handler) (*Server, string) {
	t.Helper()
	if cfg.Auth == nil {
		cfg.Auth = testVerifier(t)
	}
	srv := New(cfg, nil, func(context.Context) error { return nil }, prometheus.NewRegistry(), slog.New(log))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

// letters is n random lowercase letters: a marker no log line holds by
// chance, not even seven letters of it.
func letters(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return string(b)
}

// exchange writes raw on conn (a write the server cuts short is no
// failure: it may answer and close before an oversized request is all
// sent) and reads until the server closes the connection. fasthttp logs a
// connection's error before it closes the socket, so once this returns
// the line, if any, is in the log.
func exchange(t *testing.T, conn net.Conn, raw string) string {
	t.Helper()
	_, _ = io.WriteString(conn, raw)
	return readToEOF(t, conn)
}

func readToEOF(t *testing.T, conn net.Conn) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open: %v", err)
	}
	return string(b) // a reset after the answer is no failure
}

// Logs by allow-list: whatever shape a malformed request has, its bytes
// reach neither the log nor the answer. Each shape carries a bearer token
// and a cookie with unique markers and goes to a server of its own (so
// that the log's rate limit hides nothing), with every log level on; no
// log line and no answer may hold a marker, or any seven characters of
// one.
func TestTransportErrorsLogNoRequestBytes(t *testing.T) {
	token, cookie, sni := "tok"+letters(t, 40), "ck"+letters(t, 24), "sni"+letters(t, 16)
	auth := "Authorization: Bearer " + token + "\r\nCookie: session=" + cookie + "\r\n"
	bigHeader := "GET /healthz HTTP/1.1\r\nHost: x\r\n" + auth + "X-Pad: " + strings.Repeat("p", 16<<10) + "\r\n\r\n"
	bigBody := "POST /auctions HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 8000\r\n\r\n" + strings.Repeat(token, 8000/len(token)+1)[:8000]
	bigChunked := "POST /auctions HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n1f40\r\n" +
		strings.Repeat(cookie, 8000/len(cookie)+1)[:8000] + "\r\n0\r\n\r\n"
	type shape struct {
		name string
		send func(t *testing.T, conn net.Conn) string
	}
	raw := func(name, request string) shape {
		return shape{name, func(t *testing.T, conn net.Conn) string { return exchange(t, conn, request) }}
	}
	shapes := []shape{
		raw("garbage request line", "GARBAGE\r\n"+auth+"\r\n"),
		raw("garbage request line, token first", "Bearer "+token+" "+cookie+"\r\n\r\n"),
		raw("method with a bad character", "GE(T /healthz HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n"),
		raw("NUL in the request line", "G\x00T /"+token+" HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n"),
		raw("HTTP/0.9", "GET /"+token+"\r\n"+auth+"\r\n"),
		raw("unknown HTTP version", "GET /"+token+" HTTP/9.9\r\nHost: x\r\n"+auth+"\r\n"),
		raw("no request URI", "GET  HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n"),
		raw("invalid request URI", "GET http://[::1/"+token+" HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n"),
		raw("header without a colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization Bearer "+token+"\r\nCookie session="+cookie+"\r\n\r\n"),
		raw("header name with a space", "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthori zation: Bearer "+token+"\r\n\r\n"),
		raw("header name with a control byte", "GET /healthz HTTP/1.1\r\nHost: x\r\nAuth\x01orization: Bearer "+token+"\r\nCookie: session="+cookie+"\r\n\r\n"),
		raw("NUL in a header value", "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+token+"\x00\r\nCookie: session="+cookie+"\x00\r\n\r\n"),
		raw("folded header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\r\n Bearer "+token+"\r\n\tsession="+cookie+"\r\n\r\n"),
		raw("two Host headers", "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: "+token+"\r\n"+auth+"\r\n"),
		raw("invalid UTF-8 in a header", "GET /healthz HTTP/1.1\r\nHost: x\r\n"+auth+"X-B: \xff\xfe"+token+"\r\n\r\n"),
		raw("Content-Length not a number", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: abc\r\n\r\n{\"title\":\""+token+"\"}"),
		raw("negative Content-Length", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: -1\r\n\r\n"+token),
		raw("two different Content-Lengths", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 1\r\nContent-Length: 2\r\n\r\n"+token),
		raw("Content-Length and chunked", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+token),
		raw("unsupported Transfer-Encoding", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Transfer-Encoding: gzip\r\n\r\n"+token),
		raw("bad chunk size", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Transfer-Encoding: chunked\r\n\r\nzz\r\n"+token+"\r\n0\r\n\r\n"),
		raw("chunk longer than its size", "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Transfer-Encoding: chunked\r\n\r\n2\r\n"+token+"\r\n0\r\n\r\n"),
		raw("forbidden trailer", "POST /auctions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: Authorization\r\n\r\n0\r\n"+auth+"\r\n"),
		raw("oversized header", bigHeader),
		raw("oversized body", bigBody),
		raw("oversized chunked body", bigChunked),
		raw("binary noise", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"+token+"\r\n"+cookie+"\r\n\r\n"),
		{"TLS hello to the plain port", func(t *testing.T, conn net.Conn) string {
			c := tls.Client(conn, &tls.Config{ServerName: sni + ".example", NextProtos: []string{"Bearer " + token, cookie},
				InsecureSkipVerify: true}) //nolint:gosec // never completes: the server speaks plain HTTP
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.HandshakeContext(ctx); err == nil {
				t.Fatal("a TLS handshake with the plain HTTP port succeeded")
			}
			return readToEOF(t, conn)
		}},
		{"slow partial headers", func(t *testing.T, conn net.Conn) string {
			return exchange(t, conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+auth+"X-Partial: "+token)
		}},
		{"slow partial body", func(t *testing.T, conn net.Conn) string {
			return exchange(t, conn, "POST /auctions HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Length: 500\r\n\r\n{\"title\":\""+token)
		}},
		{"client leaves mid-headers", func(t *testing.T, conn net.Conn) string {
			_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+auth+"X-Partial: "+token)
			if err := conn.(*net.TCPConn).SetLinger(0); err != nil { // close with a reset
				t.Fatal(err)
			}
			_ = conn.Close()
			return ""
		}},
	}

	markers := []string{token, cookie, sni}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			var logs syncBuffer
			srv, addr := rawServer(t, Config{ReadTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, MaxBodyBytes: 1024},
				slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			answer := sh.send(t, conn)
			// A connection the client reset has no answer to wait for: wait
			// until the server has let go of it, having logged what it logs.
			eventually(t, 5*time.Second, "the server to let go of the connection", func() error {
				if n := srv.public.GetOpenConnectionsCount(); n > 0 {
					return fmt.Errorf("%d open", n)
				}
				return nil
			})
			if leak := leaked(answer, markers); leak != "" {
				t.Errorf("the answer holds %q:\n%s", leak, answer)
			}
			if leak := leaked(logs.String(), markers); leak != "" {
				t.Errorf("the log holds %q:\n%s", leak, logs.String())
			}
		})
	}
}

// leaked returns the first marker, or seven characters of one, that text
// holds; "" if none.
func leaked(text string, markers []string) string {
	for _, m := range markers {
		for i := 0; i+7 <= len(m); i++ {
			if strings.Contains(text, m[i:i+7]) {
				return m[i : i+7]
			}
		}
	}
	return ""
}
