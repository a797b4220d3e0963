package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bidgate/persist/pgtest"
	"bidgate/shard"
)

// testServer is a real gateway on a loopback port, backed by a fresh database.
type testServer struct {
	t    testing.TB
	base string
	reg  *prometheus.Registry // the shard's metrics
}

// startServer serves a shard without rate limit or automatic promotion, so
// that tests may bid as often as they like.
func startServer(t testing.TB) (*testServer, *pgxpool.Pool) {
	return startServerWith(t, shard.Config{RateLimit: -1, PromoteRate: -1})
}

func startServerWith(t testing.TB, cfg shard.Config) (*testServer, *pgxpool.Pool) {
	t.Helper()
	db, _ := pgtest.New(t, 32)
	reg := prometheus.NewRegistry()
	s := serveOn(t, shard.New(db, pgtest.Redis(t), cfg, reg), db.Ping)
	s.reg = reg
	return s, db
}

func serveOn(t testing.TB, a Auctions, ready func(context.Context) error) *testServer {
	return serveWith(t, Config{}, a, ready)
}

func serveWith(t testing.TB, cfg Config, a Auctions, ready func(context.Context) error) *testServer {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(cfg, a, ready, prometheus.NewRegistry(), log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &testServer{t: t, base: "http://" + ln.Addr().String()}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// do sends a request; body is sent as is when it is a string, else as JSON.
func (s *testServer) do(method, path string, body any, header ...string) response {
	s.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}
