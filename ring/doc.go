// Package ring answers two questions for every bidgate node: who is in the
// cluster, and which shard node owns an auction.
//
// Membership is gossiped by hashicorp/memberlist (SWIM: failure detection by
// probing, dissemination by gossip, no central registry). Ownership is a
// buraksezer/consistent ring with bounded loads over the members that have
// the "shard" role: an auction id hashes to one of PartitionCount
// partitions, and each partition has one owner, so adding or removing one of
// N shards moves about 1/N of the auctions, not most of them.
//
// Correctness never depends on the ring (DESIGN.md, "The bid path"): two
// nodes that briefly disagree about an owner are still right, because
// PostgreSQL and Redis serialize each auction. The ring buys cache locality
// and batching, so it may lag membership by a gossip round or two.
//
// # Threads
//
// memberlist calls its EventDelegate with its node lock held; calling back
// into memberlist from there (even Members()) deadlocks, and blocking there
// stalls the whole gossip layer. The delegate therefore only appends the
// event to an unbounded queue and returns. One goroutine per Ring takes the
// events, updates the member table, rebuilds the owner table, updates the
// metrics, logs, and calls Config.OnChange. Readers (Owner, Owners, Members,
// Self) load an atomic pointer to the latest immutable snapshot: no lock on
// the bid path. A panic while applying an event or rebuilding is recovered,
// logged and counted; the previous owner table stays in force.
//
// # Trust
//
// The gossip key (Config.SecretKey) keeps out processes that do not hold
// it, but a process that does can gossip anything. So a member is on this
// node's ring only once the join proof in its metadata verifies under the
// cluster secret (Config.ClusterSecret, or ClusterSecretPrevious during a
// rotation): an HMAC over its incarnation name, id, addresses, roles, birth
// and leaving flag (see prover). A member whose proof is missing or wrong is
// listed with state "rejected", owns nothing here, and is counted and
// logged once; so is a member the forwarder rejects (Ring.Reject) because
// its answer to a forwarded bid did not verify, for rejectFor.
//
// # Node names
//
// Each process incarnation gossips under a fresh name, "<NodeID>-<random
// hex>", and puts its birth time (unix nanoseconds) in its metadata.
// memberlist keys everything by name, and with one name per operator id a
// restart goes wrong in two ways: a restart on the same address with the
// same metadata produces no event at all (the others never learn that the
// process, and its in-memory state, is new), and a restart on another
// address is refused as a name conflict until the old entry is reaped
// (about 30 s). The ring itself is keyed by NodeID: when two incarnations of
// one id are alive at once (a restart before the crash was detected) the
// youngest owns, so a restarted node gets back the same auctions.
//
// # Timing
//
// The memberlist configuration is memberlist.DefaultLocalConfig with one
// change (timings measured on loopback):
//
//   - GossipInterval 100 ms, with RetransmitMult raised from 2 to 4 (see
//     retransmitMult): a new node is seen by the others in ~0.1 s; a
//     node that calls Leave is off the others' rings in ~0.1-0.2 s (Leave
//     itself returns after both of its broadcasts, ~0.2 s).
//   - ProbeInterval 1 s, ProbeTimeout 200 ms, SuspicionMult 3: a crashed node
//     is suspected at its next probe and declared dead after the suspicion
//     timeout, 3 s with fewer than 10 nodes (SuspicionMult x max(1,
//     log10(N)) x ProbeInterval), up to SuspicionMaxTimeoutMult (6) times
//     longer without confirmations from other nodes: ~5 s in practice.
//   - PushPullInterval 15 s: full state syncs repair missed gossip.
//   - TCPTimeout 1 s: bounds one attempt to reach a seed.
//   - GossipToTheDeadTime 15 s: a dead node is still gossiped to (so it can
//     refute) and kept by memberlist that long; this package keeps dead and
//     left members in Members() for forgetAfter (1 min).
//
// memberlist v0.7.0 raises no event when a node becomes suspect, and the
// Node it hands to delegates never carries its state (nodeState.State
// shadows Node.State), so Member.State is "alive", "left" or "dead"; the
// difference between left and dead comes from the metadata: Leave first
// re-advertises the node with a leaving flag (which also takes it off the
// ring at once), then broadcasts the leave.
package ring
