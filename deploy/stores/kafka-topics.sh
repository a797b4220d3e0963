#!/usr/bin/env bash
# Creates bidgate's Kafka topics with production settings, before the first
# node starts. bidgate creates any missing topic itself (with
# --kafka-partitions and --kafka-replication and the broker's defaults for
# everything else); creating them here sets retention and min.insync.replicas
# too. Existing topics are left alone (--if-not-exists).
#
#   BOOTSTRAP=kafka-0:9093 COMMAND_CONFIG=admin.properties deploy/stores/kafka-topics.sh
#
# Needs Kafka's kafka-topics.sh on PATH (or KAFKA_BIN=/opt/kafka/bin).
set -euo pipefail

BOOTSTRAP=${BOOTSTRAP:?set BOOTSTRAP to a broker address, host:port}
KAFKA_BIN=${KAFKA_BIN:-}
# Partitions bound the persisters' parallelism: each partition of
# bid-accepted is read by one persister of the group at a time. 12 divides
# evenly over 2, 3, 4, 6 and 12 nodes. Keep it equal to --kafka-partitions.
PARTITIONS=${PARTITIONS:-12}
# 3 replicas, 2 in sync: bidgate produces with acks=all, so an acknowledged
# message survives the loss of one broker.
REPLICATION=${REPLICATION:-3}
MIN_ISR=${MIN_ISR:-2}

args=(--bootstrap-server "$BOOTSTRAP")
if [ -n "${COMMAND_CONFIG:-}" ]; then
  args+=(--command-config "$COMMAND_CONFIG") # TLS/SASL settings of an admin client
fi

create() { # create TOPIC RETENTION_MS
  "${KAFKA_BIN:+$KAFKA_BIN/}kafka-topics.sh" "${args[@]}" --create --if-not-exists \
    --topic "$1" --partitions "$PARTITIONS" --replication-factor "$REPLICATION" \
    --config min.insync.replicas="$MIN_ISR" \
    --config unclean.leader.election.enable=false \
    --config cleanup.policy=delete \
    --config retention.ms="$2"
}

# bid-accepted: hot bids on their way from Redis to PostgreSQL. bidgate does
# not rely on Kafka keeping them (the reconciler repairs from the Redis log),
# so a few days cover any outage and a replay for audit.
create bid-accepted $((3 * 24 * 3600 * 1000))
# auction-closed and auction-cancelled: events for other systems (payments,
# notifications). Keep them long enough for a consumer to be down over a
# holiday and catch up.
create auction-closed $((14 * 24 * 3600 * 1000))
create auction-cancelled $((14 * 24 * 3600 * 1000))
