package ring

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/buraksezer/consistent"
)

// snapshot is one immutable view of the cluster. The event goroutine builds
// a new one on every change and publishes it with an atomic store; readers
// never lock and never see a half-built table.
type snapshot struct {
	members []Member // everyone known, alive or gone, sorted by ID then Name
	self    Member
	alive   int // members in state alive
	own     *ownership
}

// ownership is the owner table computed by consistent for the shard members.
type ownership struct {
	partitions uint64
	// shards are the members on the ring, one per NodeID, in the order of
	// consistent's GetClosestN: sorted by the hash of their ring key.
	shards []Member
	// owner[p] is the index in shards of partition p's owner.
	owner []uint32
}

// ringParams are the consistent settings, validated by Config.Validate.
type ringParams struct {
	partitions, replication int
	load                    float64
}

// ringKey is a member on the consistent ring: its NodeID, so a restarted
// node (new name, same id) lands on the same partitions.
type ringKey string

func (k ringKey) String() string { return string(k) }

// owner returns the member owning auction id.
func (o *ownership) ownerOf(id int64) (Member, bool) {
	if len(o.shards) == 0 {
		return Member{}, false
	}
	return o.shards[o.owner[partitionOf(id, o.partitions)]], true
}

// ownersOf returns the first n distinct owners of auction id in ring order,
// as consistent's GetClosestN does: the owner, then the next members by
// hash of their ring key, wrapping around.
func (o *ownership) ownersOf(id int64, n int) []Member {
	n = min(n, len(o.shards))
	if n <= 0 {
		return nil
	}
	first := int(o.owner[partitionOf(id, o.partitions)])
	out := make([]Member, n)
	for i := range out {
		out[i] = o.shards[(first+i)%len(o.shards)]
	}
	return out
}

// ringMembers picks the members that belong on the ring: alive, not
// leaving, with the shard role, and for each NodeID only the youngest
// incarnation (latest Birth, then greatest Name, so every node picks alike).
func ringMembers(table map[string]*entry) []Member {
	byID := make(map[string]Member)
	for _, e := range table {
		m := e.member
		if m.State != StateAlive || e.leaving || !e.valid || !m.HasRole(RoleShard) {
			continue
		}
		if cur, ok := byID[m.ID]; ok && (cur.Birth > m.Birth || cur.Birth == m.Birth && cur.Name > m.Name) {
			continue
		}
		byID[m.ID] = m
	}
	out := make([]Member, 0, len(byID))
	for _, m := range byID {
		out = append(out, m)
	}
	return out
}

// buildOwnership computes the owner of every partition. consistent panics
// on configurations it cannot place; Config.Validate rules those out,
// and a panic anyway (a bug, or a consistent release that behaves
// differently) is returned as an error so the caller keeps its last table.
func buildOwnership(p ringParams, shards []Member) (own *ownership, err error) {
	defer func() {
		if v := recover(); v != nil {
			own, err = nil, fmt.Errorf("ring: consistent panicked with %d members: %v", len(shards), v)
		}
	}()
	own = &ownership{partitions: uint64(p.partitions)}
	if len(shards) == 0 {
		return own, nil
	}
	h := hasher{}
	sorted := slices.Clone(shards)
	slices.SortFunc(sorted, func(a, b Member) int {
		return cmp.Or(cmp.Compare(h.Sum64([]byte(a.ID)), h.Sum64([]byte(b.ID))), cmp.Compare(a.ID, b.ID))
	})
	index := make(map[string]uint32, len(sorted))
	keys := make([]consistent.Member, len(sorted))
	for i, m := range sorted {
		index[m.ID] = uint32(i)
		keys[i] = ringKey(m.ID)
	}
	c := consistent.New(keys, consistent.Config{
		Hasher:            h,
		PartitionCount:    p.partitions,
		ReplicationFactor: p.replication,
		Load:              p.load,
	})
	own.shards = sorted
	own.owner = make([]uint32, p.partitions)
	for part := range own.owner {
		o := c.GetPartitionOwner(part)
		if o == nil {
			return nil, fmt.Errorf("ring: partition %d has no owner", part)
		}
		own.owner[part] = index[o.String()]
	}
	return own, nil
}

// sortMembers orders members for Members(): by ID, then Name.
func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Name, b.Name))
	})
}
