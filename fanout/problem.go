package fanout

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/valyala/fasthttp"
)

// problem is the RFC 9457 document the gateway answers errors with; fanout
// answers its own refusals (before the upgrade) in the same shape so that a
// client handles both alike.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// writeProblem answers with status and a stable code. A positive
// retryAfter (seconds) is sent as Retry-After, which 503 answers always carry.
func writeProblem(ctx *fasthttp.RequestCtx, status int, code, detail string, retryAfter int) {
	if status == fasthttp.StatusServiceUnavailable && retryAfter <= 0 {
		retryAfter = 1
	}
	if retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	b, _ := json.Marshal(problem{Type: "urn:bidgate:problem:" + code, Title: http.StatusText(status),
		Status: status, Detail: detail, Code: code})
	ctx.Response.Header.SetContentType("application/problem+json")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}
