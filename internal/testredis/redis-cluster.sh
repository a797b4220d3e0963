#!/usr/bin/env bash
# A Redis Cluster of real redis-server processes on loopback, for make
# test-cluster: 3 primaries and 3 replicas on ports BASE..BASE+5 (each node's
# bus port, port + 10000, must be free too), cluster-node-timeout 2000 ms so
# that a failover takes seconds; a replica always may take over (validity
# factor 0), however long ago it last heard from its primary.
#
#   internal/testredis/redis-cluster.sh start DIR [BASE]   prints the nodes' addresses, comma-separated
#   internal/testredis/redis-cluster.sh restart DIR PORT   starts a killed node again
#   internal/testredis/redis-cluster.sh stop DIR
set -euo pipefail

cmd=${1:?start or stop}
dir=${2:?a directory for the node files}
base=${3:-7100}
nodes=6

free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# launch starts (or restarts, with its nodes.conf: it rejoins) the node on port $1.
launch() {
  redis-server --port "$1" --bind 127.0.0.1 --cluster-enabled yes --cluster-node-timeout 2000 \
    --cluster-replica-validity-factor 0 --cluster-config-file "$dir/$1/nodes.conf" --dir "$dir/$1" \
    --save "" --appendonly no --daemonize yes --pidfile "$dir/$1/pid" --logfile "$dir/$1/log"
}

case $cmd in
start)
  mkdir -p "$dir"
  addrs=()
  for i in $(seq 0 $((nodes - 1))); do
    port=$((base + i))
    free "$port" && free $((port + 10000)) || { echo "port $port or $((port + 10000)) is taken" >&2; exit 1; }
    mkdir -p "$dir/$port"
    launch "$port"
    addrs+=("127.0.0.1:$port")
  done
  for i in $(seq 0 $((nodes - 1))); do
    for _ in $(seq 1 100); do redis-cli -p $((base + i)) ping >/dev/null 2>&1 && break; sleep 0.1; done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; exit 1; }
  # Every node must see the whole cluster before tests start.
  for i in $(seq 0 $((nodes - 1))); do
    for try in $(seq 1 100); do
      redis-cli -p $((base + i)) cluster info | grep -q '^cluster_state:ok' && break
      [ "$try" = 100 ] && { echo "node $((base + i)): cluster_state not ok" >&2; exit 1; }
      sleep 0.1
    done
  done
  # ...and every replica must have finished its first sync, or a failover
  # right after start would promote an empty replica.
  for i in $(seq 0 $((nodes - 1))); do
    info=$(redis-cli -p $((base + i)) info replication)
    grep -q '^role:slave' <<<"$info" || continue
    for try in $(seq 1 100); do
      redis-cli -p $((base + i)) info replication | grep -q '^master_link_status:up' && break
      [ "$try" = 100 ] && { echo "replica $((base + i)) did not sync" >&2; exit 1; }
      sleep 0.1
    done
  done
  (IFS=,; echo "${addrs[*]}")
  ;;
restart)
  # A killed node comes back; once the cluster has promoted its replica, it
  # rejoins as the new primary's replica.
  launch "${3:?the port of the node}"
  ;;
stop)
  pids=()
  for pidfile in "$dir"/*/pid; do
    [ -f "$pidfile" ] && pids+=("$(cat "$pidfile")")
  done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do # they write nodes.conf on their way out
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start DIR [BASE] | restart DIR PORT | stop DIR" >&2
  exit 2
  ;;
esac
