// Package apitest checks HTTP exchanges against an OpenAPI document, for
// tests: a test client passes every request it sent and the answer it got
// to Check, and an answer the document does not describe (an undocumented
// status, header value, field or problem code) fails the test that
// provoked it. This keeps the hand-written contract and the code from
// drifting apart: whatever a test makes the server say, the document must
// have promised.
//
// It is built on getkin/kin-openapi (openapi3filter), with JSON Schema
// 2020-12 validation for OpenAPI 3.1 documents.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Contract is one OpenAPI document, ready to check exchanges against. It is
// safe for concurrent use.
type Contract struct {
	doc    *openapi3.T
	router routers.Router
	// problem is the document's Problem schema (components.schemas), for
	// the answers to routes it does not have.
	problem *openapi3.SchemaRef
}

// New loads doc, an OpenAPI document in JSON or YAML, checks that it is a
// valid one, and returns its Contract.
func New(doc []byte) (*Contract, error) {
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	ctx := loader.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if err := t.Validate(ctx); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	// The document's servers name where it is deployed; a test server
	// listens anywhere, so routes are matched on the path alone.
	t.Servers = nil
	router, err := legacy.NewRouter(t)
	if err != nil {
		return nil, fmt.Errorf("route the OpenAPI document: %w", err)
	}
	c := &Contract{doc: t, router: router}
	if t.Components != nil {
		c.problem = t.Components.Schemas["Problem"]
	}
	return c, nil
}

// Has reports whether the document has an operation for req's method and
// path.
func (c *Contract) Has(req *http.Request) bool {
	_, _, err := c.router.FindRoute(req)
	return err == nil
}

// Check checks one exchange: req, sent with reqBody (nil: none), was
// answered with resp, whose body was respBody. The answer's status must be
// documented for the operation, and its headers and body must match what
// the document says of that status. A request the server accepted (a 1xx,
// 2xx or 3xx answer) must match the document too, or the document is
// stricter than the server. A request to a path or method the document
// does not have must be answered 404 route_not_found or 405
// method_not_allowed.
func (c *Contract) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	if err := c.check(req, reqBody, resp, respBody); err != nil {
		return fmt.Errorf("%s %s answered %d, which the OpenAPI document %q does not describe: %w",
			req.Method, req.URL.Path, resp.StatusCode, c.doc.Info.Title, err)
	}
	return nil
}

func (c *Contract) check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return c.checkNoRoute(req, err, resp, respBody)
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		// Tokens are the server's to check; the document's security
		// requirements are checked by what the server answers.
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
	reqInput := &openapi3filter.RequestValidationInput{
		Request: withBody(req, reqBody, route), PathParams: params, Route: route, Options: opts,
	}
	ctx := context.Background()
	if resp.StatusCode < 400 {
		if err := openapi3filter.ValidateRequest(ctx, reqInput); err != nil {
			return fmt.Errorf("the server accepted a request the document refuses: %w", err)
		}
	}
	if err := c.checkBodyDocumented(route, resp, respBody); err != nil {
		return err
	}
	return openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqInput,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                opts,
	})
}

// checkBodyDocumented fails an answer with a body where the document
// describes none (openapi3filter lets any body through then).
func (c *Contract) checkBodyDocumented(route *routers.Route, resp *http.Response, body []byte) error {
	if len(body) == 0 || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	ref := route.Operation.Responses.Status(resp.StatusCode)
	if ref == nil || ref.Value == nil {
		return nil // ValidateResponse says the status is undocumented
	}
	if len(ref.Value.Content) == 0 {
		return fmt.Errorf("the answer has a body (%s) but the document describes none", resp.Header.Get("Content-Type"))
	}
	return nil
}

// checkNoRoute checks the answer to a request the document has no
// operation for: the router's own refusal, as a problem.
func (c *Contract) checkNoRoute(req *http.Request, routeErr error, resp *http.Response, body []byte) error {
	want, code := http.StatusNotFound, "route_not_found"
	if c.hasPath(req) {
		want, code = http.StatusMethodNotAllowed, "method_not_allowed"
	}
	if resp.StatusCode != want {
		return fmt.Errorf("no operation of the document matches (%v), so the answer must be %d %s", routeErr, want, code)
	}
	if c.problem == nil || c.problem.Value == nil {
		return errors.New("the document has no Problem schema to check the refusal against")
	}
	value, err := decodeJSON(resp, body, "application/problem+json")
	if err != nil {
		return err
	}
	if err := c.problem.Value.VisitJSON(value, c.schemaOptions()...); err != nil {
		return fmt.Errorf("the refusal does not match the Problem schema: %w", err)
	}
	if m, _ := value.(map[string]any); m["code"] != code {
		return fmt.Errorf("the refusal's code is %v, not %s", m["code"], code)
	}
	return nil
}

// hasPath reports whether the document has req's path under another
// method.
func (c *Contract) hasPath(req *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodTrace} {
		if m != req.Method && c.Has(&http.Request{Method: m, URL: req.URL, Header: http.Header{}}) {
			return true
		}
	}
	return false
}

func (c *Contract) schemaOptions() []openapi3.SchemaValidationOption {
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.VisitAsResponse()}
	if c.doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return opts
}

// decodeJSON decodes a JSON body whose Content-Type must be mediaType.
func decodeJSON(resp *http.Response, body []byte, mediaType string) (any, error) {
	if ct := resp.Header.Get("Content-Type"); ct != mediaType {
		return nil, fmt.Errorf("Content-Type %q, not %s", ct, mediaType)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %w", err)
	}
	return v, nil
}

// withBody is a copy of req whose body reads body, for the validator to
// read however often it likes. When the operation takes one media type
// only, the body is read as that whatever its Content-Type says, as
// bidgate reads every body as JSON (`curl -d` labels it a form): the
// document's media type says what the body must be, not its label.
func withBody(req *http.Request, body []byte, route *routers.Route) *http.Request {
	r := req.Clone(req.Context())
	if rb := route.Operation.RequestBody; len(body) > 0 && rb != nil && rb.Value != nil && len(rb.Value.Content) == 1 &&
		rb.Value.Content.Get(req.Header.Get("Content-Type")) == nil {
		for mediaType := range rb.Value.Content {
			r.Header.Set("Content-Type", mediaType)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
	r.ContentLength = int64(len(body))
	if body == nil {
		r.Body = http.NoBody
	}
	return r
}

// Contracts are the documents of several listeners, for a client that talks
// to more than one (the public and the admin listener): an exchange is
// checked against the first contract that has an operation for it, or
// against the first contract when none has.
type Contracts []*Contract

// Check checks one exchange (Contract.Check).
func (cs Contracts) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	for _, c := range cs {
		if c.Has(req) {
			return c.Check(req, reqBody, resp, respBody)
		}
	}
	if len(cs) == 0 {
		return errors.New("no contract to check against")
	}
	return cs[0].Check(req, reqBody, resp, respBody)
}
