package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
)

// AuctionSpec is an auction the harness created, as it was at creation: the
// audit needs the original end (the end in force before the first bid).
type AuctionSpec struct {
	ID           int64     `json:"id"`
	Hot          bool      `json:"hot"`
	StartPrice   string    `json:"startPrice"`
	MinIncrement string    `json:"minIncrement"`
	OriginalEnd  time.Time `json:"originalEnd"`
	// ReservePrice (hidden: no answer shows it, the harness knows it as
	// the seller) and BuyNowPrice are "" when the auction has none.
	ReservePrice string `json:"reservePrice,omitempty"`
	BuyNowPrice  string `json:"buyNowPrice,omitempty"`
}

// newAuction is the body of POST /auctions.
type newAuction struct {
	SellerID            int64  `json:"sellerId"`
	Title               string `json:"title"`
	StartPrice          string `json:"startPrice"`
	MinIncrement        string `json:"minIncrement"`
	EndTime             string `json:"endTime"`
	Hot                 bool   `json:"hot"`
	ExtendWindowSeconds int64  `json:"extendWindowSeconds"`
	ExtendBySeconds     int64  `json:"extendBySeconds"`
	ReservePrice        string `json:"reservePrice,omitempty"`
	BuyNowPrice         string `json:"buyNowPrice,omitempty"`
}

// auctionAnswer is the part of an auction response the harness reads.
type auctionAnswer struct {
	ID           int64     `json:"id"`
	StartPrice   string    `json:"startPrice"`
	MinIncrement string    `json:"minIncrement"`
	EndTime      time.Time `json:"endTime"`
	Hot          bool      `json:"hot"`
	BuyNowPrice  string    `json:"buyNowPrice"`
	Code         string    `json:"code"`
	Detail       string    `json:"detail"`
}

// api is a small client for the non-bid calls: readiness, creating and
// reading auctions.
type api struct {
	targets []Target
	clients []*fasthttp.HostClient
	tokens  *Tokens
	next    atomic.Uint64
}

func newAPI(targets []Target, conns int, tokens *Tokens) *api {
	a := &api{targets: targets, tokens: tokens}
	for _, t := range targets {
		a.clients = append(a.clients, newHostClient(t, conns))
	}
	return a
}

func (a *api) close() {
	for _, c := range a.clients {
		c.CloseIdleConnections()
	}
}

// authorization is the request header bearer tokens go in.
var authorization = []byte(fasthttp.HeaderAuthorization)

// call sends one request to target t (-1: the next one round-robin), with
// the Authorization header bearer ("Bearer <token>") unless it is nil.
func (a *api) call(t int, method, path string, bearer []byte, body any, out any) (int, error) {
	if t < 0 {
		t = int((a.next.Add(1) - 1) % uint64(len(a.clients)))
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(a.targets[t].Base + path)
	req.Header.SetMethod(method)
	if bearer != nil {
		req.Header.SetCanonical(authorization, bearer)
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		req.Header.SetContentType("application/json")
		req.SetBody(b)
	}
	if err := a.clients[t].DoTimeout(req, resp, 30*time.Second); err != nil {
		return 0, fmt.Errorf("%s %s%s: %w", method, a.targets[t].Base, path, err)
	}
	if out != nil && len(resp.Body()) > 0 {
		if err := json.Unmarshal(resp.Body(), out); err != nil {
			return resp.StatusCode(), fmt.Errorf("%s %s%s: %d with a body that is not JSON: %.200s", method, a.targets[t].Base, path, resp.StatusCode(), resp.Body())
		}
	}
	return resp.StatusCode(), nil
}

// ready checks GET /readyz on every target.
func (a *api) ready() error {
	for i, t := range a.targets {
		status, err := a.call(i, fasthttp.MethodGet, "/readyz", nil, nil, nil)
		if err != nil {
			return fmt.Errorf("bidgate at %s does not answer (is it running?): %w", t.Base, err)
		}
		if status != fasthttp.StatusOK {
			return fmt.Errorf("bidgate at %s is not ready: GET /readyz answered %d", t.Base, status)
		}
	}
	return nil
}

// get sends GET path to target t and returns the body of its 200.
func (a *api) get(t int, path string) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(a.targets[t].Base + path)
	req.Header.SetMethod(fasthttp.MethodGet)
	if err := a.clients[t].DoTimeout(req, resp, 30*time.Second); err != nil {
		return nil, fmt.Errorf("GET %s%s: %w", a.targets[t].Base, path, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, fmt.Errorf("GET %s%s: %d %.200s", a.targets[t].Base, path, resp.StatusCode(), resp.Body())
	}
	return append([]byte(nil), resp.Body()...), nil
}

// createAuction creates an auction as its seller (n.SellerID, with a sell
// token for that user).
func (a *api) createAuction(n newAuction) (AuctionSpec, error) {
	bearer, err := a.tokens.Header(n.SellerID, auth.ScopeSell)
	if err != nil {
		return AuctionSpec{}, fmt.Errorf("create auction: %w", err)
	}
	var ans auctionAnswer
	status, err := a.call(-1, fasthttp.MethodPost, "/auctions", bearer, n, &ans)
	if err != nil {
		return AuctionSpec{}, err
	}
	if status != fasthttp.StatusCreated {
		err := fmt.Errorf("create auction: %d %s: %s", status, ans.Code, ans.Detail)
		if status == fasthttp.StatusUnauthorized {
			err = fmt.Errorf("%w (the nodes do not accept bidbench's tokens: give --key, --jwt-issuer and --jwt-audience of the issuer they trust)", err)
		}
		return AuctionSpec{}, err
	}
	// The reserve is the seller's own, never in an answer.
	return AuctionSpec{ID: ans.ID, Hot: ans.Hot, StartPrice: ans.StartPrice, MinIncrement: ans.MinIncrement,
		OriginalEnd: ans.EndTime, ReservePrice: n.ReservePrice, BuyNowPrice: ans.BuyNowPrice}, nil
}

// createMany creates n auctions through the API with conc concurrent
// clients; build(i) is auction i's request. bar draws progress.
func (a *api) createMany(ctx context.Context, n, conc int, bar func(planned, done func() int64) *progress, build func(i int) newAuction) ([]AuctionSpec, error) {
	out := make([]AuctionSpec, n)
	var (
		next, done atomic.Int64
		wg         sync.WaitGroup
		mu         sync.Mutex
		first      error
	)
	p := bar(func() int64 { return int64(n) }, done.Load)
	defer p.Stop()
	for range max(1, min(conc, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				spec, err := a.createAuction(build(i))
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
				out[i] = spec
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// formatEnd writes an end time the way the API takes it.
func formatEnd(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
