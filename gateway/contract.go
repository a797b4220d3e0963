package gateway

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/valyala/fasthttp"
)

// document serves an OpenAPI document (gateway/openapi) as written, with a
// strong ETag of its bytes: a client or CI job that polls it gets 304 Not
// Modified until the API changes.
func document(doc []byte) fasthttp.RequestHandler {
	sum := sha256.Sum256(doc)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("ETag", etag)
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		if string(ctx.Request.Header.Peek("If-None-Match")) == etag {
			ctx.SetStatusCode(fasthttp.StatusNotModified)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(doc)
	}
}
