package gateway

import (
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A transport error's log line says its kind and the peer's address, and
// the kind is counted.
func TestTransportErrorLogLine(t *testing.T) {
	for _, c := range []struct {
		name, request, kind, status string
	}{
		{"garbage", "GARBAGE\r\nAuthorization: Bearer x\r\n\r\n", kindRequestLine, "HTTP/1.1 400"},
		{"bad chunk", "POST /auctions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", kindBody, "HTTP/1.1 400"},
		{"bad Content-Length", "POST /auctions HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", kindHeader, "HTTP/1.1 400"},
		{"oversized header", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", kindHeaderTooLarge, "HTTP/1.1 431"},
		{"oversized body", "POST /auctions HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n" + strings.Repeat("a", 2000), kindBodyTooLarge, "HTTP/1.1 413"},
		{"slow", "GET / HTTP/1.1\r\nHost: x\r\n", kindTimeout, "HTTP/1.1 408"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			srv, addr := rawServer(t, Config{ReadTimeout: 300 * time.Millisecond, MaxBodyBytes: 1024}, slog.NewJSONHandler(&logs, nil))
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if answer := exchange(t, conn, c.request); !strings.HasPrefix(answer, c.status) {
				t.Fatalf("answered %q, want %s", answer, c.status)
			}
			var line struct{ Msg, Kind, Peer string }
			if err := json.Unmarshal([]byte(logs.String()), &line); err != nil {
				t.Fatalf("want one JSON line: %v\n%s", err, logs.String())
			}
			if line.Kind != c.kind || line.Peer != conn.LocalAddr().String() {
				t.Fatalf("logged %+v, want kind %s and peer %s", line, c.kind, conn.LocalAddr())
			}
			if n := testutil.ToFloat64(srv.metrics.transportErrors.WithLabelValues(c.kind)); n != 1 {
				t.Fatalf("bidgate_http_transport_errors_total{kind=%q} = %v, want 1", c.kind, n)
			}
		})
	}
}
