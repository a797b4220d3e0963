package gateway

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
	"bidgate/ring"
	"bidgate/shard"
)

// stubCluster names a fixed owner, then this node.
type stubCluster struct{ owner, self ring.Member }

func (c stubCluster) Owners(int64, int) []ring.Member { return []ring.Member{c.owner, c.self} }
func (c stubCluster) Self() ring.Member               { return c.self }
func (c stubCluster) Members() []ring.Member          { return []ring.Member{c.owner, c.self} }

// A process that poses as an auction's owner (it answers on the internal
// address a member advertises, but does not hold the cluster secret) is
// never believed: its answer carries no valid signature, so the forwarding
// node treats it as unreachable and decides the bid itself.
func TestForwardedAnswerMustBeSigned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rogue := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(201)
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set(headerAnswerSig, "00")
		ctx.SetBodyString(`{"amount":"FAKE","bidderId":42,"seq":1}`)
	}}
	served := make(chan error, 1)
	go func() { served <- rogue.Serve(ln) }()
	t.Cleanup(func() {
		if err := rogue.Shutdown(); err != nil {
			t.Errorf("shut the rogue down: %v", err)
		}
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) { // in case Serve had not begun
			t.Errorf("close the rogue's listener: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("rogue: %v", err)
		}
	})

	cluster := stubCluster{owner: ring.Member{Name: "rogue", ID: "rogue", InternalAddr: ln.Addr().String(), Roles: []string{ring.RoleShard}},
		self: ring.Member{Name: "honest", ID: "honest", Roles: []string{ring.RoleShard}}}
	s, _ := startGateway(t, Config{NodeID: "honest", Cluster: cluster, ClusterSecret: clusterSecret},
		shard.Config{RateLimit: -1, PromoteRate: -1})
	id := s.createAuction(validAuction())
	r := s.do("POST", fmt.Sprintf("/auctions/%d/bids", id), map[string]any{"amount": 2000},
		append([]string{"Idempotency-Key", uuid.NewString()}, as(t, 42, auth.ScopeBid)...)...)
	if r.status != 201 || r.body["amount"] != "2000.00" || r.header.Get(headerNode) != "honest" {
		t.Fatalf("bid forwarded to a rogue owner: %d %s (node %q), want 201 decided by this node", r.status, r.raw, r.header.Get(headerNode))
	}
	if m := s.admin().do("GET", "/metrics", nil).raw; strings.Contains(m, `bidgate_forwarded_total{result="ok"}`) {
		t.Fatal("the rogue's answer was counted as a forward")
	}
}
