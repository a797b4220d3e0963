package fanout

import (
	"github.com/valyala/fasthttp"

	"bidgate/internal/problem"
)

// writeProblem answers with status and a stable code (problem.Write); a
// positive retryAfter (seconds) is sent as Retry-After.
func writeProblem(ctx *fasthttp.RequestCtx, status int, code, detail string, retryAfter int) {
	p := problem.New(status, code, detail)
	p.RetryAfterSeconds = retryAfter
	problem.Write(ctx, p)
}
