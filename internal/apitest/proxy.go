package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// Proxy is a reverse proxy to target that checks every exchange passing
// through it with checker and tells report of each answer the document
// does not describe; the answer still reaches the client unchanged. Put in
// front of a running node, it checks real traffic (the documentation's
// examples, a bidbench run) against the contract. A WebSocket upgrade is
// checked up to its 101 and then relayed as is.
func Proxy(target *url.URL, checker Checker, report func(err error, body []byte)) http.Handler {
	return &httputil.ReverseProxy{
		// Rewrite, unlike Director, adds no X-Forwarded-For: the node sees
		// the client's loopback address either way.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			if pr.In.Body == nil || pr.In.Body == http.NoBody {
				return
			}
			sent, err := io.ReadAll(pr.In.Body)
			if err != nil {
				// The client went away mid-body; the node gets what came.
				report(err, nil)
			}
			pr.Out.Body = io.NopCloser(bytes.NewReader(sent))
			pr.Out.ContentLength = int64(len(sent))
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), sentKey{}, sent))
		},
		// The check is in the transport, where the answer still has its
		// hop-by-hop headers (a 426's Upgrade) that the proxy then drops.
		Transport: checkingTransport{checker: checker, report: report},
	}
}

// sentKey is the context key of the request body a Proxy forwarded.
type sentKey struct{}

// checkingTransport sends requests with http.DefaultTransport and checks
// each answer as the node sent it.
type checkingTransport struct {
	checker Checker
	report  func(err error, body []byte)
}

func (t checkingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	sent, _ := req.Context().Value(sentKey{}).([]byte)
	var raw []byte
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, err := io.ReadAll(resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		raw = b
		resp.Body = io.NopCloser(bytes.NewReader(raw))
	}
	if err := t.checker.Check(req, sent, resp, raw); err != nil {
		t.report(err, raw)
	}
	return resp, nil
}
