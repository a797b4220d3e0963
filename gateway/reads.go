package gateway

import (
	"bytes"
	"context"
	"strconv"

	"github.com/valyala/fasthttp"

	"bidgate"
)

// Reader answers GET /auctions/{id}: the node's read cache, or the shard.
// minSeq > 0 asks for a state at least that new (a client's own bid).
type Reader interface {
	Read(ctx context.Context, id, minSeq int64) (bidgate.Auction, error)
}

// direct reads Auctions that cannot take minSeq: every read is of the
// store, which holds it unless the store is a lagging replica.
type direct struct{ Auctions }

func (d direct) Read(ctx context.Context, id, _ int64) (bidgate.Auction, error) {
	return d.Auction(ctx, id)
}

// finalCacheControl lets a CDN keep a closed or cancelled auction, which
// never changes again, for a day; an open one is revalidated every time.
// An insider's view (the leader's id) is private: no shared cache keeps it.
const (
	finalCacheControl   = "public, max-age=86400, immutable"
	openCacheControl    = "no-cache"
	privateCacheControl = "private, no-cache"
)

// etag is the auction's version: every field of the answer that can change
// moves with its seq (price, leader, bid count, an anti-sniping end), its
// status (a close, a cancel, a buy-now), its mode (a promotion) or its end
// (a hot buy-now moves it back).
func etag(a bidgate.Auction) string {
	b := make([]byte, 0, 64)
	b = append(b, `"a`...)
	b = strconv.AppendInt(b, a.ID, 10)
	b = append(b, "-s"...)
	b = strconv.AppendInt(b, a.BidCount, 10)
	b = append(b, '-')
	b = append(b, a.Status...)
	b = append(b, '-')
	b = append(b, a.Mode...)
	b = append(b, "-e"...)
	b = strconv.AppendInt(b, a.EndTime.UnixMicro(), 36)
	return string(append(b, '"'))
}

// minSeqOf reads the optional minSeq query parameter: a non-negative
// integer in decimal digits, given at most once.
func minSeqOf(ctx *fasthttp.RequestCtx) (int64, error) {
	vals := ctx.QueryArgs().PeekMulti("minSeq")
	switch len(vals) {
	case 0:
		return 0, nil
	case 1:
	default:
		return 0, bidgate.InvalidInput("invalid_query", "minSeq is given more than once")
	}
	s := string(vals[0])
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		if len(s) > 24 {
			s = s[:24] + "..."
		}
		return 0, bidgate.InvalidInput("invalid_query", "minSeq is a non-negative integer in decimal digits with no sign or leading zero, got "+strconv.Quote(s))
	}
	return n, nil
}

// noneMatch reports whether an If-None-Match value names tag, by the weak
// comparison RFC 9110 (13.1.2) asks for: W/ is ignored, "*" matches any.
// A malformed list matches nothing, so the full answer is sent.
func noneMatch(header []byte, tag string) bool {
	h := bytes.TrimSpace(header)
	if string(h) == "*" {
		return true
	}
	want := []byte(tag)
	for len(h) > 0 {
		h = bytes.TrimLeft(h, " \t,")
		if len(h) == 0 {
			break
		}
		h = bytes.TrimPrefix(h, []byte("W/"))
		if len(h) == 0 || h[0] != '"' {
			return false
		}
		end := bytes.IndexByte(h[1:], '"')
		if end < 0 {
			return false
		}
		if bytes.Equal(h[:end+2], want) {
			return true
		}
		h = bytes.TrimLeft(h[end+2:], " \t")
		if len(h) > 0 && h[0] != ',' {
			return false
		}
	}
	return false
}

// writeAuction answers a read with its caching headers: 304 with no body
// when the client holds this version, else the auction, in the insider's
// view (the leader's id) or the public one. The views' ETags differ, so a
// client that changes views never gets a 304 for the other's answer.
func (s *Server) writeAuction(ctx *fasthttp.RequestCtx, a bidgate.Auction, insider bool) {
	tag := etag(a)
	if insider {
		tag = tag[:len(tag)-1] + `-p"`
	}
	ctx.Response.Header.Set(fasthttp.HeaderETag, tag)
	ctx.Response.Header.Set(fasthttp.HeaderVary, "Authorization")
	if insider {
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, privateCacheControl)
	} else if a.Status.Final() {
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, finalCacheControl)
	} else {
		ctx.Response.Header.Set(fasthttp.HeaderCacheControl, openCacheControl)
	}
	if inm := ctx.Request.Header.Peek(fasthttp.HeaderIfNoneMatch); len(inm) > 0 && noneMatch(inm, tag) {
		ctx.Response.Header.SetNoDefaultContentType(true)
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(s.rendered.body(a, tag, insider))
}
