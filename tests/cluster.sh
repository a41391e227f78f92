#!/usr/bin/env bash
# A local Redis Cluster with the module, for trying it by hand (`make cluster`, `make cluster-stop`).
#
#   tests/cluster.sh start   3 primaries + 3 replicas on 127.0.0.1 (free ports from CLUSTER_PORT,
#                            default 21001, never 6379; each port's bus port +10000 free too), each
#                            with the module (a private copy of XSTREAM_MODULE, default
#                            target/dist/libxstream.so), created with `redis-cli --cluster create`;
#                            TAKEOVER=yes loads it in takeover mode (XADD ... served by the module).
#   tests/cluster.sh stop    stops exactly the servers `start` started (their pid files) and
#                            removes their directory (CLUSTER_DIR, default target/cluster).
#
# The servers are redis-server from PATH unless XSTREAM_REDIS_SERVER names another binary.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${CLUSTER_DIR:-$ROOT/target/cluster}
MODULE=${XSTREAM_MODULE:-$ROOT/target/dist/libxstream.so}
# Ports and their bus ports (+10000) below Linux's ephemeral range (32768+), where an outgoing
# connection could hold a bus port.
BASE=${CLUSTER_PORT:-21001}
SERVER=${XSTREAM_REDIS_SERVER:-redis-server}
CLI=${REDIS_CLI:-redis-cli}
TAKEOVER=${TAKEOVER:-no}
NODES=6

listening() { # port -> true if a socket uses it (listening or connected)
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

start() {
    if [ -e "$DIR/ports" ]; then
        echo "cluster.sh: a cluster from $DIR is running (ports $(cat "$DIR/ports")); run 'make cluster-stop' first" >&2
        exit 1
    fi
    [ -f "$MODULE" ] || { echo "cluster.sh: no module at $MODULE (make build)" >&2; exit 1; }
    mkdir -p "$DIR"
    cp "$MODULE" "$DIR/libxstream.so"
    local ports=() p=$BASE
    while [ ${#ports[@]} -lt $NODES ]; do
        if [ "$p" -ne 6379 ] && ! listening "$p" && ! listening $((p + 10000)); then
            ports+=("$p")
        fi
        p=$((p + 1))
        [ "$p" -lt $((BASE + 1000)) ] || { echo "cluster.sh: no $NODES free ports from $BASE" >&2; exit 1; }
    done
    for p in "${ports[@]}"; do
        mkdir -p "$DIR/$p"
        "$SERVER" --port "$p" --bind 127.0.0.1 --daemonize yes \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
            --appendonly no --save "" --dir "$DIR/$p" \
            --pidfile "$DIR/$p/redis.pid" --logfile "$DIR/$p/redis.log" \
            --loadmodule "$DIR/libxstream.so" takeover "$TAKEOVER"
    done
    echo "${ports[*]}" > "$DIR/ports"
    for p in "${ports[@]}"; do
        for _ in $(seq 100); do
            "$CLI" -p "$p" PING >/dev/null 2>&1 && break
            sleep 0.1
        done
        "$CLI" -p "$p" PING >/dev/null || { echo "cluster.sh: node $p did not start:"; tail -5 "$DIR/$p/redis.log"; stop; exit 1; }
    done
    local addrs=()
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    "$CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$DIR/create.log" 2>&1 || {
        echo "cluster.sh: redis-cli --cluster create failed:"; tail -20 "$DIR/create.log"; stop; exit 1; }
    for p in "${ports[@]}"; do
        for _ in $(seq 200); do
            "$CLI" -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' && break
            sleep 0.1
        done
    done
    echo "cluster.sh: 3 primaries + 3 replicas on 127.0.0.1 ports ${ports[*]} (module in $DIR, takeover $TAKEOVER)"
    echo "  try: $CLI -c -p ${ports[0]} XS.ADD '{s}1' '*' f v"
    echo "       $CLI -c -p ${ports[0]} CLUSTER NODES"
}

stop() {
    [ -d "$DIR" ] || { echo "cluster.sh: no cluster in $DIR"; return 0; }
    local pids=()
    for f in "$DIR"/*/redis.pid; do
        [ -f "$f" ] && pids+=("$(cat "$f")")
    done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$DIR"
    echo "cluster.sh: stopped ${#pids[@]} servers"
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
