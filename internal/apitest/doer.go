package apitest

import (
	"bytes"
	"io"
	"net/http"
)

// Checker checks one exchange: a Contract or Contracts.
type Checker interface {
	Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error
}

// Doer is an HTTP client, for the generated client (apiclient's
// HttpRequestDoer) and any other that sends an *http.Request: it sends
// each request with Client (http.DefaultClient when nil), checks the
// exchange with Checker, and tells Report of an answer the document does
// not describe (a test passes t.Errorf-like func; the answer is still
// returned, for the test to go on).
type Doer struct {
	Client  *http.Client
	Checker Checker
	Report  func(err error, body []byte)
}

// Do sends req and checks what it is answered.
func (d Doer) Do(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		if err := req.Body.Close(); err != nil {
			return nil, err
		}
		sent = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	if err := d.Checker.Check(req, sent, resp, raw); err != nil {
		d.Report(err, raw)
	}
	return resp, nil
}
