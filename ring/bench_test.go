package ring

import (
	"sync/atomic"
	"testing"
)

// BenchmarkOwner measures Owner on a real 3-member ring, from all
// goroutines at once, as the gateway calls it on every bid.
func BenchmarkOwner(b *testing.B) {
	nodes := startCluster(b, 3)
	r := nodes[0].Ring
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1 << 32)
		for pb.Next() {
			id++
			if _, ok := r.Owner(id); !ok {
				b.Fatal("no owner")
			}
		}
	})
}

// BenchmarkOwners measures Owners(id, 2), the owner and the node to retry
// on, which the gateway's forwarder asks for.
func BenchmarkOwners(b *testing.B) {
	nodes := startCluster(b, 3)
	r := nodes[0].Ring
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1 << 32)
		for pb.Next() {
			id++
			if len(r.Owners(id, 2)) != 2 {
				b.Fatal("no owners")
			}
		}
	})
}
