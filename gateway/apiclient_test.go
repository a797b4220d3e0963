package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"bidgate/internal/apiclient"
	"bidgate/internal/apitest"
	"bidgate/internal/auth"
)

// checkedDoer is the generated client's HTTP client: every exchange is
// checked against contract.
func checkedDoer(t *testing.T, contract apitest.Checker) apitest.Doer {
	return apitest.Doer{Checker: contract, Report: func(err error, body []byte) { t.Errorf("%v\n%s", err, body) }}
}

// money is an amount in a request, as the generated client writes it.
func money(t *testing.T, s string) *apiclient.MoneyInput {
	t.Helper()
	var m apiclient.MoneyInput
	if err := m.FromMoneyInput0(s); err != nil {
		t.Fatal(err)
	}
	return &m
}

// bearer sets the Authorization header of user's token with scopes.
func bearer(t *testing.T, user int64, scopes ...string) apiclient.RequestEditorFn {
	tok := token(t, user, scopes...)
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}
}

// The Go client generated from the public document (internal/apiclient)
// creates, bids and reads as docs/api.md shows, and what it sends and gets
// matches the document.
func TestGeneratedClient(t *testing.T) {
	s, _ := startServer(t)
	c, err := apiclient.NewClientWithResponses(s.base, apiclient.WithHTTPClient(checkedDoer(t, s.contract)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	created, err := c.CreateAuctionWithResponse(ctx, apiclient.CreateAuctionRequest{Title: "Vintage Leica M3",
		StartPrice: *money(t, "1000"), MinIncrement: *money(t, "10"), EndTime: time.Now().Add(time.Hour)},
		bearer(t, testSeller, auth.ScopeSell))
	if err != nil || created.JSON201 == nil {
		t.Fatalf("create: %v %s", err, created.Body)
	}
	a := created.JSON201
	if a.MinimumBid != "1010.00" || a.LeaderId != nil || a.Status != apiclient.OPEN {
		t.Fatalf("created %+v", a)
	}

	bid := func(user int64, body apiclient.BidRequest) *apiclient.PlaceBidResponse {
		t.Helper()
		r, err := c.PlaceBidWithResponse(ctx, a.Id, &apiclient.PlaceBidParams{IdempotencyKey: uuid.New()}, body,
			bearer(t, user, auth.ScopeBid))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := bid(101, apiclient.BidRequest{MaxAmount: money(t, "1500")}); r.JSON201 == nil ||
		!r.JSON201.Leading || r.JSON201.CurrentPrice != "1010.00" {
		t.Fatalf("X's proxy bid: %d %s", r.StatusCode(), r.Body)
	}
	if r := bid(102, apiclient.BidRequest{Amount: money(t, "1200")}); r.JSON201 == nil ||
		r.JSON201.Leading || r.JSON201.CurrentPrice != "1210.00" {
		t.Fatalf("Y's bid: %d %s", r.StatusCode(), r.Body)
	}
	if r := bid(103, apiclient.BidRequest{Amount: money(t, "1210")}); r.ApplicationproblemJSON409 == nil ||
		r.ApplicationproblemJSON409.MinimumBid == nil || *r.ApplicationproblemJSON409.MinimumBid != "1220.00" {
		t.Fatalf("Z's low bid: %d %s", r.StatusCode(), r.Body)
	}
	// The public sees the leader by alias; the seller by id.
	public, err := c.GetAuctionWithResponse(ctx, a.Id, nil)
	if err != nil || public.JSON200 == nil {
		t.Fatalf("get: %v", err)
	}
	if l := public.JSON200.Leader; l == nil || *l != "Bidder 1" || public.JSON200.LeaderId != nil || public.JSON200.CurrentPrice != "1210.00" {
		t.Fatalf("after the bids, public: %s", public.Body)
	}
	got, err := c.GetAuctionWithResponse(ctx, a.Id, nil, bearer(t, testSeller, auth.ScopeSell))
	if err != nil || got.JSON200 == nil {
		t.Fatalf("get: %v", err)
	}
	if l := got.JSON200.LeaderId; l == nil || *l != 101 || got.JSON200.CurrentPrice != "1210.00" {
		t.Fatalf("after the bids, the seller: %s", got.Body)
	}
}
