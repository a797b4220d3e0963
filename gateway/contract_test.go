package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"bidgate/gateway/openapi"
	"bidgate/ring"
)

// Each listener serves its own document at GET /openapi.json, exactly as
// embedded, with an ETag that a client can revalidate with.
func TestOpenAPIServed(t *testing.T) {
	s := serveOn(t, panicky{}, func(context.Context) error { return nil })
	for _, c := range []struct {
		name string
		srv  *testServer
		doc  []byte
	}{
		{"public", s, openapi.Public()},
		{"admin", s.admin(), openapi.Admin()},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.srv.t = t
			r := c.srv.do("GET", "/openapi.json", nil)
			if r.status != 200 || r.raw != string(c.doc) {
				t.Fatalf("GET /openapi.json: %d, %d bytes, want 200 and the %d bytes embedded", r.status, len(r.raw), len(c.doc))
			}
			if r.body["openapi"] != "3.1.0" {
				t.Errorf("openapi %v, want 3.1.0", r.body["openapi"])
			}
			etag := r.header.Get("ETag")
			if n := c.srv.do("GET", "/openapi.json", nil, "If-None-Match", etag); n.status != 304 || n.raw != "" {
				t.Errorf("If-None-Match of the ETag %s: %d %q, want 304 and no body", etag, n.status, n.raw)
			}
			if n := c.srv.do("GET", "/openapi.json", nil, "If-None-Match", `"stale"`); n.status != 200 {
				t.Errorf("If-None-Match of another ETag: %d, want 200", n.status)
			}
		})
	}
}

// stubViewers is a fan-out that refuses every viewer: enough to have the
// WebSocket route.
type stubViewers struct{}

func (stubViewers) ServeWS(ctx *fasthttp.RequestCtx, _ int64) {
	ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
}

// stubInbox refuses every /ws/me connection: enough to have the route.
type stubInbox struct{}

func (stubInbox) ServeWS(ctx *fasthttp.RequestCtx, _ int64) {
	ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
}

// Every route a listener serves, with every option on, is in its document,
// and every operation of the document is a route: a route added without
// its contract (or a contract for a route that is gone) fails here.
func TestEveryRouteIsDocumented(t *testing.T) {
	self := ring.Member{Name: "self", Roles: []string{ring.RoleShard}}
	cfg := Config{Cluster: stubCluster{owner: self, self: self}, Viewers: stubViewers{}, Inbox: stubInbox{}, Auth: testVerifier(t),
		ClusterSecret: []byte("0123456789abcdef0123456789abcdef")}
	srv := New(cfg.withDefaults(), panicky{}, func(context.Context) error { return nil }, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct {
		name   string
		routes *router.Router
		doc    []byte
	}{
		{"public", srv.publicRoutes(), openapi.Public()},
		{"admin", srv.adminRoutes(prometheus.NewRegistry()), openapi.Admin()},
		{"internal", srv.internalRoutes(), openapi.Internal()},
	} {
		t.Run(c.name, func(t *testing.T) {
			served := map[string]bool{}
			for method, paths := range c.routes.List() {
				for _, p := range paths {
					// A catch-all parameter ({profile:*}) is a path parameter
					// in OpenAPI.
					served[method+" "+strings.Replace(p, ":*}", "}", 1)] = true
				}
			}
			documented := operations(t, c.doc)
			for _, op := range slices.Sorted(maps.Keys(served)) {
				if !documented[op] {
					t.Errorf("%s is served but not in the %s document", op, c.name)
				}
			}
			for _, op := range slices.Sorted(maps.Keys(documented)) {
				if !served[op] {
					t.Errorf("%s is in the %s document but not served", op, c.name)
				}
			}
		})
	}
}

// operations lists a document's operations as "METHOD /path".
func operations(t *testing.T, doc []byte) map[string]bool {
	t.Helper()
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for path, item := range d.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				ops[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	return ops
}
