package bench

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// etagServer answers GET /auctions/{id} on loopback: with withETag, 200
// and the ETag "v-{id}", or 304 when If-None-Match names it; without, a
// plain 200. It counts the If-None-Match values it got that it never
// issued.
type etagServer struct {
	addr                    string
	conditional, wrongMatch atomic.Int64
}

func startETagServer(t *testing.T, withETag bool) *etagServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &etagServer{addr: ln.Addr().String()}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		id, ok := strings.CutPrefix(string(ctx.Path()), "/auctions/")
		if !ok || !ctx.IsGet() {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		tag := `"v-` + id + `"`
		if match := string(ctx.Request.Header.Peek(fasthttp.HeaderIfNoneMatch)); match != "" {
			s.conditional.Add(1)
			if !withETag || match != tag {
				s.wrongMatch.Add(1)
			} else {
				ctx.SetStatusCode(fasthttp.StatusNotModified)
				return
			}
		}
		if withETag {
			ctx.Response.Header.Set(fasthttp.HeaderETag, tag)
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":` + id + `}`)
	}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestPollers: the pollers send their GETs open-loop, revalidate with the
// last ETag a node gave for an auction (304s count), and simply GET from a
// node that sends none.
func TestPollers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		withETag bool
	}{{"with ETags", true}, {"without ETags", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := startETagServer(t, tc.withETag)
			targets, err := ParseTargets(context.Background(), "http://"+s.addr)
			if err != nil {
				t.Fatal(err)
			}
			e := &Env{opt: DefaultOptions(), targets: targets}
			const rate, auctions = 200, 2
			res := e.poll(context.Background(), rate, time.Now(), time.Second, []int64{11, 12})
			if res.Sent != rate || res.Errors != 0 || res.Other != 0 || res.OK+res.NotModified != res.Sent {
				t.Fatalf("%+v", res)
			}
			if res.Latency.Count != res.Sent || res.Latency.P99 <= 0 || res.AnsweredPerSec <= 0 {
				t.Errorf("latency %+v, %.0f answered/s", res.Latency, res.AnsweredPerSec)
			}
			if n := s.wrongMatch.Load(); n > 0 {
				t.Errorf("%d polls sent an If-None-Match the node never issued", n)
			}
			switch {
			case tc.withETag && (res.OK < auctions || res.NotModified == 0 || res.NotModified != s.conditional.Load() || res.ETags != res.OK):
				t.Errorf("with ETags: %d 200 (%d with an ETag), %d 304, %d conditional GETs", res.OK, res.ETags, res.NotModified, s.conditional.Load())
			case !tc.withETag && (res.OK != res.Sent || res.ETags != 0 || s.conditional.Load() != 0):
				t.Errorf("without ETags: %d 200 of %d, %d conditional GETs", res.OK, res.Sent, s.conditional.Load())
			}
			if !strings.Contains(res.Sentence(), "304") {
				t.Errorf("sentence %q", res.Sentence())
			}
		})
	}
}
