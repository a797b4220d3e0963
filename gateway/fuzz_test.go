package gateway

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

// FuzzBidRequest: any body and Idempotency-Key give a BidRequest or an
// *InputError (or ErrSubjectMismatch), never a panic, and an accepted
// request holds a valid amount (or maximum) and the token's bidder.
func FuzzBidRequest(f *testing.F) {
	for _, body := range []string{`{"amount":1010}`, `{"amount":"1010.5","bidderId":42}`, `{"amount":1,"amount":2}`,
		`{"AMOUNT":1}`, `{"amount":1e3}`, `{"amount":null}`, "{\"amount\":\"1\xff\"}", `[]`, ``, `{"bidderId":43,"amount":5}`,
		`{"maxAmount":"1500"}`, `{"amount":1,"maxAmount":2}`, `{"maxAmount":null}`, `{}`, `{"amount":0}`, `{"maxAmount":"-1"}`} {
		f.Add(body, "3f1c7a52-8a3e-4c2b-9d43-2b8f0e6a9c11", "17")
	}
	f.Fuzz(func(t *testing.T, body, key, id string) {
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.SetBodyString(body)
		ctx.Request.Header.Set("Idempotency-Key", key)
		ctx.SetUserValue("id", id)
		r, err := parseBid(ctx, 42)
		var input *bidgate.InputError
		switch {
		case err == nil:
			if r.BidderID != 42 || r.AuctionID <= 0 || r.Amount.Sign() <= 0 {
				t.Fatalf("accepted %+v from %q", r, body)
			}
		case errors.As(err, &input), errors.Is(err, bidgate.ErrSubjectMismatch):
		default:
			t.Fatalf("error of an unexpected kind for %q: %v", body, err)
		}
	})
}

// FuzzAuctionRequest: any body gives a NewAuction or an input error.
func FuzzAuctionRequest(f *testing.F) {
	for _, body := range []string{`{"title":"x","startPrice":"1","minIncrement":"1","endTime":"2030-01-02T15:04:05Z"}`,
		`{"title":"x","title":"y"}`, "{\"title\":\"caf\xe9\"}", `{"startPrice":-1}`, `{"extendBySeconds":0}`} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.SetBodyString(body)
		var req createAuctionRequest
		if err := decodeJSON(ctx, &req); err != nil {
			var input *bidgate.InputError
			if !errors.As(err, &input) {
				t.Fatalf("decode %q: %v", body, err)
			}
			return
		}
		if _, err := req.toNewAuction(authPrincipal(7)); err != nil {
			var input *bidgate.InputError
			if !errors.As(err, &input) && !errors.Is(err, bidgate.ErrSubjectMismatch) {
				t.Fatalf("%q: %v", body, err)
			}
		}
	})
}

func authPrincipal(user int64) auth.Principal {
	return auth.Principal{UserID: user, Scopes: []string{auth.ScopeSell, auth.ScopeBid}}
}
