#!/usr/bin/env bash
# A one-minute flash sale on a local 3-node cluster: starts `bidgate dev`,
# waits until every node is ready, runs `bidbench flash-sale` against all
# three, prints the summary and the report's path, and stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-60s}
# The key the nodes trust bearer tokens from (bidgate dev creates it if
# missing) and bidbench signs its tokens with; both default to this path,
# relative to the checkout's root.
DEV_KEY=${DEV_KEY:-.bidgate/dev-key.pem}
NODES=(http://127.0.0.1:8080 http://127.0.0.1:8081 http://127.0.0.1:8082)

go build -o bin/bidgate ./cmd/bidgate
go build -o bin/bidbench ./cmd/bidbench

bin/bidgate dev --nodes 3 --dev-key "$DEV_KEY" > bin/demo-cluster.log 2>&1 &
cluster=$!
trap 'kill -TERM $cluster 2>/dev/null; wait $cluster 2>/dev/null || true' EXIT

for url in "${NODES[@]}"; do
  for i in $(seq 1 150); do
    curl -fs "$url/readyz" >/dev/null 2>&1 && break
    kill -0 $cluster 2>/dev/null || { echo "the cluster exited; see bin/demo-cluster.log"; exit 1; }
    [ "$i" = 150 ] && { echo "$url not ready after 30 s; see bin/demo-cluster.log"; exit 1; }
    sleep 0.2
  done
done
echo "cluster ready (log: bin/demo-cluster.log); running a $DURATION flash sale"

targets=$(IFS=,; echo "${NODES[*]}")
bin/bidbench flash-sale --duration "$DURATION" --targets "$targets" --key "$DEV_KEY" "$@"
