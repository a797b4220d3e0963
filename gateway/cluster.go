package gateway

import (
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
	"bidgate/ring"
)

// Cluster is what the gateway needs from the ring. A nil Cluster means a
// single node: everything is served locally.
type Cluster interface {
	Owners(auctionID int64, n int) []ring.Member
	Self() ring.Member
	Members() []ring.Member
	// Reject takes the member named name off this node's ring: its answer
	// to a forwarded bid did not verify. reason is logged.
	Reject(name, reason string)
}

// errNoShards: no node of the cluster decides bids.
var errNoShards = refuse(fasthttp.StatusServiceUnavailable, "no_shards", "no shard node is in the cluster")

type memberResponse struct {
	Name         string   `json:"name"`
	ID           string   `json:"id"`
	State        string   `json:"state"`
	Roles        []string `json:"roles"`
	PublicAddr   string   `json:"publicAddr"`
	InternalAddr string   `json:"internalAddr"`
	Self         bool     `json:"self"`
}

func (s *Server) newMemberResponse(m ring.Member) memberResponse {
	return memberResponse{Name: m.Name, ID: m.ID, State: m.State, Roles: m.Roles,
		PublicAddr: m.PublicAddr, InternalAddr: m.InternalAddr, Self: m.Name == s.cfg.Cluster.Self().Name}
}

// clusterMembers serves GET /cluster/members.
func (s *Server) clusterMembers(ctx *fasthttp.RequestCtx, _ auth.Principal) {
	members := s.cfg.Cluster.Members()
	out := make([]memberResponse, len(members))
	for i, m := range members {
		out[i] = s.newMemberResponse(m)
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"members": out})
}

// clusterOwner serves GET /cluster/owner/{id}: the node a bid on that
// auction goes to, and the one it would be retried on.
func (s *Server) clusterOwner(ctx *fasthttp.RequestCtx, _ auth.Principal) {
	id, err := pathID(ctx, "id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	owners := s.cfg.Cluster.Owners(id, 2)
	if len(owners) == 0 {
		s.writeError(ctx, errNoShards)
		return
	}
	out := map[string]any{"auctionId": id, "owner": s.newMemberResponse(owners[0])}
	if len(owners) > 1 {
		out["next"] = s.newMemberResponse(owners[1])
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
