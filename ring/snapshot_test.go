package ring

import (
	"fmt"
	"slices"
	"testing"

	"github.com/buraksezer/consistent"
)

var defaultParams = ringParams{partitions: 271, replication: 20, load: 1.25}

func shardMembers(n int) []Member {
	var ms []Member
	for i := 1; i <= n; i++ {
		ms = append(ms, Member{Name: fmt.Sprintf("node%d-abc", i), ID: fmt.Sprintf("node%d", i), Roles: []string{RoleShard}, State: StateAlive})
	}
	return ms
}

// The lock-free owner table must answer exactly what consistent answers.
func TestOwnershipMatchesConsistent(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 16} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			ms := shardMembers(n)
			own, err := buildOwnership(defaultParams, ms)
			if err != nil {
				t.Fatal(err)
			}
			var keys []consistent.Member
			for _, m := range ms {
				keys = append(keys, ringKey(m.ID))
			}
			c := consistent.New(keys, consistent.Config{Hasher: hasher{}, PartitionCount: 271, ReplicationFactor: 20, Load: 1.25})
			for id := int64(-500); id < 10_000; id++ {
				k := auctionKey(id)
				want := c.LocateKey(k[:]).String()
				got, ok := own.ownerOf(id)
				if !ok || got.ID != want {
					t.Fatalf("owner of %d: got %s, consistent says %s", id, got.ID, want)
				}
				closest, err := c.GetClosestN(k[:], n)
				if err != nil {
					t.Fatal(err)
				}
				owners := own.ownersOf(id, n)
				if len(owners) != n {
					t.Fatalf("ownersOf(%d, %d) has %d members", id, n, len(owners))
				}
				for i := range closest {
					if owners[i].ID != closest[i].String() {
						t.Fatalf("ownersOf(%d)[%d] = %s, GetClosestN says %s", id, i, owners[i].ID, closest[i])
					}
				}
			}
		})
	}
}

func TestOwnershipEdges(t *testing.T) {
	empty, err := buildOwnership(defaultParams, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := empty.ownerOf(1); ok {
		t.Error("an empty ring has an owner")
	}
	if got := empty.ownersOf(1, 2); got != nil {
		t.Errorf("an empty ring has owners %v", got)
	}
	three, _ := buildOwnership(defaultParams, shardMembers(3))
	for _, n := range []int{-1, 0} {
		if got := three.ownersOf(1, n); got != nil {
			t.Errorf("ownersOf(1, %d) = %v", n, got)
		}
	}
	if got := three.ownersOf(1, 99); len(got) != 3 {
		t.Errorf("ownersOf(1, 99) has %d members, want 3", len(got))
	}

	// More shard members than partitions: consistent v1.0.0 places them
	// (some own nothing) without panicking.
	many, err := buildOwnership(ringParams{partitions: 3, replication: 1, load: 1.0001}, shardMembers(10))
	if err != nil {
		t.Fatalf("10 members on 3 partitions: %v", err)
	}
	owners := map[string]bool{}
	for id := int64(0); id < 1000; id++ {
		m, _ := many.ownerOf(id)
		owners[m.ID] = true
	}
	if len(owners) > 3 {
		t.Errorf("%d owners for 3 partitions", len(owners))
	}

	// A load consistent cannot honour panics inside it; that is an error
	// here, never a crash.
	if _, err := buildOwnership(ringParams{partitions: 271, replication: 20, load: 0.5}, shardMembers(3)); err == nil {
		t.Error("load 0.5 built an owner table")
	}
}

func TestRingMembersPicksYoungestIncarnation(t *testing.T) {
	m := func(name, id string, birth int64, state string, roles ...string) Member {
		return Member{Name: name, ID: id, Birth: birth, State: state, Roles: roles}
	}
	table := map[string]*entry{
		"a-old":   {member: m("a-old", "a", 1, StateAlive, RoleShard), valid: true},
		"a-new":   {member: m("a-new", "a", 2, StateAlive, RoleShard), valid: true},
		"b":       {member: m("b", "b", 1, StateAlive, RoleShard), valid: true},
		"c-dead":  {member: m("c-dead", "c", 9, StateDead, RoleShard), valid: true},
		"c":       {member: m("c", "c", 1, StateAlive, RoleShard), valid: true},
		"d":       {member: m("d", "d", 1, StateAlive, RoleShard), valid: true, leaving: true},
		"gw":      {member: m("gw", "gw", 1, StateAlive, RoleGateway), valid: true},
		"foreign": {member: m("foreign", "foreign", 0, StateAlive), valid: false},
		"e-left":  {member: m("e-left", "e", 1, StateLeft, RoleShard), valid: true},
	}
	var got []string
	for _, m := range ringMembers(table) {
		got = append(got, m.Name)
	}
	slices.Sort(got)
	if want := []string{"a-new", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("ring members %v, want %v", got, want)
	}
}

func TestPartitionOfMatchesConsistent(t *testing.T) {
	c := consistent.New(nil, consistent.Config{Hasher: hasher{}, PartitionCount: 271})
	for id := int64(-1000); id < 1000; id++ {
		k := auctionKey(id)
		if got, want := partitionOf(id, 271), c.FindPartitionID(k[:]); got != uint64(want) {
			t.Fatalf("partition of %d: %d, consistent says %d", id, got, want)
		}
	}
}
