package gateway

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"bidgate"
)

// decodeJSON reads exactly one JSON object, strictly: unknown, duplicate
// or case-mismatched member names and invalid UTF-8 are malformed_json (a
// lenient decoder lets {"amount":1,"amount":2100} bid 2100). An amount that
// does not parse is invalid_amount. The Content-Type is not checked: the
// body is JSON whatever a client labels it.
func decodeJSON(ctx *fasthttp.RequestCtx, v any) error {
	return decodeBody(ctx.PostBody(), v)
}

// decodeBody is decodeJSON of a body read already.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return bidgate.InvalidInput("malformed_json", "request body is empty")
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var semantic *json.SemanticError
	if errors.As(err, &semantic) && moneyMembers[string(semantic.JSONPointer)] {
		return bidgate.InvalidInput("invalid_amount", fmt.Sprintf("%s: %v", strings.TrimPrefix(string(semantic.JSONPointer), "/"), semantic.Err))
	}
	return bidgate.InvalidInput("malformed_json", "request body: "+err.Error())
}

// moneyMembers are the request members that hold amounts.
var moneyMembers = map[string]bool{"/amount": true, "/startPrice": true, "/minIncrement": true, "/reservePrice": true,
	"/maxAmount": true, "/buyNowPrice": true}

// writeJSON answers ctx with status and v as JSON.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := stdjson.Marshal(v)
	if err != nil {
		panic(err) // only our own types are written
	}
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}

// formatTime is how answers write a time: RFC 3339 in UTC, with the
// fraction of a second the time has.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
