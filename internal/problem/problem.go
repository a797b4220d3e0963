// Package problem writes bidgate's one error format for HTTP clients: an
// RFC 9457 problem document (application/problem+json) whose type is the
// URN of a stable code, with Retry-After on every 429 and 503. The gateway
// and the fan-out both answer through it, so a client handles all alike.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
)

// Problem is one problem document. Code is stable and meant for programs;
// Title and Detail are for people.
type Problem struct {
	Type         string `json:"type"`
	Title        string `json:"title"`
	Status       int    `json:"status"`
	Detail       string `json:"detail,omitempty"`
	Code         string `json:"code"`
	CurrentPrice string `json:"currentPrice,omitempty"`
	MinimumBid   string `json:"minimumBid,omitempty"`
	// RetryAfterSeconds goes into the Retry-After header of 429 and 503.
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
}

// DefaultRetryAfter is what a 429 or 503 without its own suggests, in
// seconds.
const DefaultRetryAfter = 1

// New is the problem of status with code and detail.
func New(status int, code, detail string) Problem {
	return Problem{Type: "urn:bidgate:problem:" + code, Title: http.StatusText(status),
		Status: status, Detail: detail, Code: code}
}

// Write answers ctx with p.
func Write(ctx *fasthttp.RequestCtx, p Problem) {
	ctx.Response.Header.SetContentType("application/problem+json")
	if p.Status == fasthttp.StatusServiceUnavailable || p.Status == fasthttp.StatusTooManyRequests {
		if p.RetryAfterSeconds <= 0 {
			p.RetryAfterSeconds = DefaultRetryAfter
		}
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(p.RetryAfterSeconds))
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a struct of strings and ints always marshals
	}
	ctx.SetStatusCode(p.Status)
	ctx.SetBody(b)
}
