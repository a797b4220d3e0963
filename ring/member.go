package ring

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hashicorp/memberlist"
)

// Member states. memberlist reports no suspicion event, so a suspect node
// stays "alive" until it is declared dead (see the package comment).
const (
	StateAlive = "alive"
	StateDead  = "dead" // failed: stopped answering probes
	StateLeft  = "left" // called Leave
	// StateRejected is alive but refused by this node: it did not prove
	// the cluster secret, or its answer to a forwarded bid was not signed
	// with it. It owns nothing here and is sent no bids.
	StateRejected = "rejected"
)

// Roles a member can have. Only RoleShard members are on the ownership ring;
// the others are listed by Members and own nothing.
const (
	RoleGateway   = "gateway"
	RoleShard     = "shard"
	RolePersister = "persister"
	RoleCloser    = "closer"
	RoleRelay     = "relay"
)

// Member is one node as the cluster sees it. Members are values, but Roles
// is shared with the ring's snapshot: read it, do not modify it.
type Member struct {
	Name         string   // memberlist node name, unique per process incarnation
	ID           string   // stable operator-given node id (e.g. "node1")
	InternalAddr string   // host:port of the node's internal HTTP endpoint (forwarded bids)
	PublicAddr   string   // host:port of its public HTTP API
	Roles        []string // e.g. gateway, shard, persister, closer, relay
	Birth        int64    // unix nanos when the process joined
	State        string   // "alive", "dead", "left" or "rejected"
	// Verified says the member proved the cluster secret to this node (its
	// join proof checked out, and it is not rejected since). Always false
	// on a ring without a ClusterSecret.
	Verified bool
}

// HasRole reports whether m runs role.
func (m Member) HasRole(role string) bool {
	return slices.Contains(m.Roles, role)
}

// meta is what a node gossips about itself in memberlist's node metadata.
// It is JSON so that nodes of different versions can add fields, and it
// must fit memberlist.MetaMaxSize (512 bytes): memberlist panics on more.
type meta struct {
	ID           string   `json:"id"`
	InternalAddr string   `json:"internal,omitempty"`
	PublicAddr   string   `json:"public,omitempty"`
	Roles        []string `json:"roles,omitempty"`
	Birth        int64    `json:"birth"`
	Leaving      bool     `json:"leaving,omitempty"` // set by Leave just before the leave broadcast
	Proof        string   `json:"proof,omitempty"`   // join proof over the node's name and the fields above (see prover)
}

// encode returns the metadata bytes, or an error if they would not fit.
func (md meta) encode() ([]byte, error) {
	b, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("ring: encode node metadata: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("ring: node metadata is %d bytes, more than memberlist's limit of %d (shorten the addresses or roles)", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// memberOf builds the Member for a memberlist node. Metadata that does not
// decode (a foreign or newer node) yields a member named after the node
// with no roles: listed, never an owner. The error says why.
func memberOf(n *memberlist.Node, state string) (Member, bool, error) {
	m, md, err := decodeMember(n, state)
	return m, md.Leaving, err
}

// decodeMember is memberOf that also returns the decoded metadata.
func decodeMember(n *memberlist.Node, state string) (Member, meta, error) {
	var md meta
	err := json.Unmarshal(n.Meta, &md)
	if err == nil && md.ID == "" {
		err = fmt.Errorf("no id")
	}
	if err != nil {
		return Member{Name: n.Name, ID: n.Name, State: state}, meta{}, fmt.Errorf("ring: node %s (%s): bad metadata: %v", n.Name, n.Address(), err)
	}
	return Member{
		Name:         n.Name,
		ID:           md.ID,
		InternalAddr: md.InternalAddr,
		PublicAddr:   md.PublicAddr,
		Roles:        slices.Clip(md.Roles),
		Birth:        md.Birth,
		State:        state,
	}, md, nil
}

// present reports whether a member in state is in the cluster (alive,
// whether this node admits it or not), as opposed to gone.
func present(state string) bool { return state == StateAlive || state == StateRejected }
