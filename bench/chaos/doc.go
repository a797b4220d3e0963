// Package chaos is bidgate's fault harness: it runs the whole system as an
// operator would, in real OS processes, and injects one fault at a time
// under a flash-sale load, then audits the invariants.
//
// Each scenario gets a fresh stack in a temporary directory: its own
// PostgreSQL (initdb and the postmaster run as the postgres user when the
// harness runs as root), its own Redis (AOF, appendfsync always), its own
// Kafka-protocol broker (`bidgate broker`, messages in memory only) and
// three `bidgate serve` nodes, all on loopback ports outside the kernel's
// ephemeral range. The nodes trust bearer tokens signed by a dev key made
// in that directory (--dev-key), and the bench mints its tokens with it. The machine's own PostgreSQL (5432) and Redis (6379) are
// never touched. The bidbench harness (package bench) offers 3 hot auctions
// at 150 bids/s each and 100 bids/s over 2,000 cold ones, 5% retried with
// the same Idempotency-Key; while it runs the scenario kills, stops or
// restarts one part; afterwards the bench audits every invariant against
// PostgreSQL and Redis, and the harness checks that every process that
// should be alive is.
//
// The scenarios: broker-kill, broker-outage-60s, node-kill, redis-kill,
// postgres-stop, rolling-restart, and on a Redis Cluster (started by
// internal/testredis/redis-cluster.sh on ports 7500-7505) redis-failover and
// redis-failover-nowait (see scenarios.go). The tests are behind the build
// tag chaos:
//
//	make chaos                                              # all eight, about 8 minutes
//	go test -tags chaos -count=1 -v -run 'TestChaos/node-kill$' ./bench/chaos/
//	CHAOS_SCENARIOS=broker-kill,redis-kill go test -tags chaos -count=1 -v ./bench/chaos/
//
// CHAOS_KEEP=1 keeps each scenario's temporary directory (data and logs).
// The summary table is printed at the end and written to
// bench-results/chaos-<timestamp>.txt; each scenario's bench result (JSON
// and gzipped records) and, for a failed scenario, its process logs go to
// bench-results/chaos-<timestamp>/.
package chaos
