// Package persist moves what the stores decided to where it must end up,
// at least once and idempotently, each pipeline on the one retry.Loop:
//
//	Relay       a hot auction's Redis log -> Kafka bid-accepted
//	Persister   Kafka bid-accepted -> PostgreSQL (pgstore.WriteHotBids),
//	            with their outbid notices, then pushed on Redis
//	Reconciler  a hot auction's Redis log -> PostgreSQL, for what Kafka lost
//	OutboxRelay PostgreSQL's outbox -> Kafka auction-closed
//
// The stores' own packages (pgstore, redisstore) hold every statement,
// script and codec; kafka holds the topics and the message signing. This
// package holds only the movement: cursors, batches, back-offs and metrics.
package persist
