package apitest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"bidgate/gateway/openapi"
)

// A Proxy relays answers unchanged and reports those the document does not
// describe, with the request body it forwarded.
func TestProxy(t *testing.T) {
	public, err := New(openapi.Public())
	if err != nil {
		t.Fatal(err)
	}
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("node: %v", err)
		}
		switch {
		case r.URL.Path == "/auctions/1":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("ETag", `"a1-s0-OPEN-COLD-eab1cdef"`)
			w.Header().Set("Cache-Control", "no-cache")
			_, _ = io.WriteString(w, auction)
		case r.URL.Path == "/ws/auctions/1":
			// A hop-by-hop header the document requires: the proxy
			// drops it, the check must still see it.
			w.Header().Set("Upgrade", "websocket")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUpgradeRequired)
			_, _ = io.WriteString(w, problem(http.StatusUpgradeRequired, "upgrade_required"))
		case strings.Contains(string(body), `"title"`):
			// A create answered 418: no such status is documented.
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, problem(http.StatusTeapot, "teapot"))
		default:
			t.Errorf("node: unexpected %s %s %q", r.Method, r.URL, body)
		}
	}))
	defer node.Close()
	target, err := url.Parse(node.URL)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		reported []string
	)
	proxy := httptest.NewServer(Proxy(target, public, func(err error, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err.Error())
	}))
	defer proxy.Close()

	for _, c := range []struct {
		method, path, body string
		status             int
		reported           string // "" when the exchange is described
	}{
		{"GET", "/auctions/1", "", 200, ""},
		{"GET", "/ws/auctions/1", "", 426, ""},
		{"POST", "/auctions", `{"title":"x"}`, 418, "418"},
	} {
		mu.Lock()
		reported = nil
		mu.Unlock()
		req, err := http.NewRequest(c.method, proxy.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.status || len(body) == 0 {
			t.Errorf("%s %s through the proxy: %d %q", c.method, c.path, resp.StatusCode, body)
		}
		mu.Lock()
		got := strings.Join(reported, "\n")
		mu.Unlock()
		if c.reported == "" && got != "" || c.reported != "" && !strings.Contains(got, c.reported) {
			t.Errorf("%s %s: reported %q, want one naming %q", c.method, c.path, got, c.reported)
		}
	}
}
