// Package problem writes bidgate's one error format for HTTP clients: an
// RFC 9457 problem document (application/problem+json) whose type is the
// URN of a stable code, with Retry-After on every 429 and 503. The gateway
// and the fan-out both answer through it, so a client handles all alike.
package problem

import (
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
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
	ctx.SetStatusCode(p.Status)
	var buf [512]byte
	ctx.SetBody(p.appendJSON(buf[:0]))
}

// appendJSON appends p as JSON, as encoding/json would write it (members
// in order, the empty optional ones left out) but for escaping no more than
// JSON requires. It writes the members itself: a hot auction answers most
// bids with a 409, and reflection was a third of writing one.
func (p *Problem) appendJSON(b []byte) []byte {
	member := func(b []byte, name, value string) []byte {
		b = append(append(append(b, ',', '"'), name...), '"', ':')
		b, _ = jsontext.AppendQuote(b, value) // invalid UTF-8 becomes U+FFFD
		return b
	}
	b, _ = jsontext.AppendQuote(append(b, `{"type":`...), p.Type)
	b = member(b, "title", p.Title)
	b = strconv.AppendInt(append(b, `,"status":`...), int64(p.Status), 10)
	if p.Detail != "" {
		b = member(b, "detail", p.Detail)
	}
	b = member(b, "code", p.Code)
	if p.CurrentPrice != "" {
		b = member(b, "currentPrice", p.CurrentPrice)
	}
	if p.MinimumBid != "" {
		b = member(b, "minimumBid", p.MinimumBid)
	}
	if p.RetryAfterSeconds != 0 {
		b = strconv.AppendInt(append(b, `,"retryAfterSeconds":`...), int64(p.RetryAfterSeconds), 10)
	}
	return append(b, '}')
}
