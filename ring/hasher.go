package ring

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// hasher is the consistent.Hasher of the ring: xxhash64, fast and well
// spread. Every node must hash alike, or they would disagree on owners.
type hasher struct{}

func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// auctionKey is the ring key of an auction: its id as 8 big-endian bytes.
func auctionKey(id int64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(id))
	return k
}

// partitionOf is consistent's FindPartitionID for an auction id (hash of the
// key modulo the partition count), computed without going through the
// Hasher interface so that the key stays on the stack.
func partitionOf(id int64, partitions uint64) uint64 {
	k := auctionKey(id)
	return xxhash.Sum64(k[:]) % partitions
}
