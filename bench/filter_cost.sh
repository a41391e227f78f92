#!/usr/bin/env bash
# The cost of the takeover command filter on a non-stream workload.
#
# Three redis-servers on free ports:
#   plain     no module
#   takeover  the module with `takeover yes` (its command filter sees every command)
#   module    the module without takeover (no filter)
# and `redis-benchmark -t set,get -n $N -P $P -q` plus `redis-benchmark ... TYPE typekey` (a
# string key: in takeover mode TYPE is rewritten to XS.TYPE, which answers `stream` for module
# streams) against each, interleaved (the order rotates every round), $ROUNDS rounds. Per
# server and test: the median requests/s, and the server's CPU per request (INFO cpu,
# user+sys, delta over the run / requests) and INFO commandstats usec_per_call (measured inside
# call(): the filter runs before it, in processCommand, so this figure cannot show the filter;
# the CPU figure can).
#
# Usage: bench/filter_cost.sh [ROUNDS]      env: N (default 1000000), P (default 16),
#        XSTREAM_MODULE (default target/dist/libxstream.so), PIN=0 to not use taskset.
# Needs: redis-server, redis-benchmark, redis-cli (redis-tools), awk.
set -euo pipefail

ROUNDS=${1:-${ROUNDS:-5}}
N=${N:-1000000}
P=${P:-16}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=${XSTREAM_MODULE:-$ROOT/target/dist/libxstream.so}
[ -f "$MODULE" ] || { echo "no module at $MODULE: make build" >&2; exit 1; }
for t in redis-server redis-benchmark redis-cli; do
    command -v $t >/dev/null || { echo "$t not found (make deps)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/xstream-filter-cost.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Server on CPU 0, benchmark client on CPU 1 (when there are 2+ CPUs and taskset exists).
SRV_PIN=() CLI_PIN=()
if [ "${PIN:-1}" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    SRV_PIN=(taskset -c 0) CLI_PIN=(taskset -c 1)
fi

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

declare -A PORT
start() { # name, module args...
    local name=$1; shift
    local dir=$WORK/$name port
    mkdir -p "$dir"
    local args=()
    if [ $# -gt 0 ]; then
        cp "$MODULE" "$dir/libxstream.so"
        args=(--loadmodule "$dir/libxstream.so" "$@")
    fi
    port=$(free_port)
    "${SRV_PIN[@]}" redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --logfile "$dir/log" \
        --save "" --appendonly no --protected-mode no "${args[@]}" &
    PIDS+=($!)
    for _ in $(seq 1 200); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.05
    done
    redis-cli -p "$port" PING >/dev/null || { echo "$name did not start:"; cat "$dir/log"; exit 1; }
    PORT[$name]=$port
}

start plain
start takeover takeover yes
start module
[ "$(redis-cli -p "${PORT[takeover]}" CONFIG GET xstream.takeover | tail -1)" = yes ] || { echo "takeover not on" >&2; exit 1; }

cpu_seconds() { # user+sys of the server
    redis-cli -p "$1" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'
}
usec_per_call() { # port, command (its XS.* twin when the filter rewrote it)
    redis-cli -p "$1" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v c="cmdstat_$2" -v x="cmdstat_xs.$2" '$1 == c || $1 == x {for (i = 2; i <= NF; i++) if ($i == "usec_per_call") print $(i+1)}'
}
for name in plain takeover module; do redis-cli -p "${PORT[$name]}" SET typekey v >/dev/null; done

RES=$WORK/results.tsv
: > "$RES"
NAMES=(plain takeover module)
echo "filter cost: redis-benchmark -t set,get -n $N -P $P -q and TYPE typekey, $ROUNDS interleaved rounds ($(redis-server --version | awk '{print $3}'), $(nproc) CPUs${SRV_PIN[*]:+, server on CPU 0 and client on CPU 1})"
for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order: round r starts with server (r-1) mod 3.
    order=()
    for i in 0 1 2; do order+=("${NAMES[$(((round - 1 + i) % 3))]}"); done
    for name in "${order[@]}"; do
        port=${PORT[$name]}
        for t in set get type; do
            redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
            if [ "$t" = type ]; then what=(TYPE typekey); else what=(-t "$t"); fi
            c0=$(cpu_seconds "$port")
            out=$("${CLI_PIN[@]}" redis-benchmark -p "$port" -n "$N" -P "$P" -q "${what[@]}" 2>/dev/null | tr '\r' '\n' | grep -E '^(SET|GET|TYPE typekey): [0-9.]+ requests per second' | tail -1 | sed 's/^TYPE typekey/TYPE/')
            c1=$(cpu_seconds "$port")
            rps=$(echo "$out" | awk '{print $2}')
            upc=$(usec_per_call "$port" "$t")
            cpu_us=$(awk -v a="$c0" -v b="$c1" -v n="$N" 'BEGIN {printf "%.4f", (b - a) * 1e6 / n}')
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "$t" "$rps" "$cpu_us" "$upc" >> "$RES"
            printf '  round %s  %-8s %s  %12s req/s  server CPU %s us/req  usec_per_call %s\n' "$round" "$name" "$t" "$rps" "$cpu_us" "$upc"
        done
    done
done

median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.4f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# Spread of the runs: (p75 - p25) / median, nearest-rank quartiles.
spread() { sort -g | awk '{a[NR] = $1} END {q1 = a[int((NR + 3) / 4)]; q3 = a[int((3 * NR + 3) / 4)]; m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.1f%%\n", (q3 - q1) / m * 100}'; }
echo
printf '%-9s %-4s %14s %9s %9s %18s %9s %14s\n' server test "median req/s" "vs plain" "IQR/med" "server CPU us/req" "vs plain" usec_per_call
for t in set get type; do
    col() { awk -F'\t' -v n="$1" -v t="$t" -v c="$2" '$2 == n && $3 == t {print $c}' "$RES"; }
    base=$(col plain 4 | median)
    cbase=$(col plain 5 | median)
    for name in "${NAMES[@]}"; do
        rps=$(col "$name" 4 | median)
        spr=$(col "$name" 4 | spread)
        cpu=$(col "$name" 5 | median)
        upc=$(col "$name" 6 | median)
        rel=$(awk -v a="$rps" -v b="$base" 'BEGIN {printf "%+.1f%%", (a / b - 1) * 100}')
        crel=$(awk -v a="$cpu" -v b="$cbase" 'BEGIN {printf "%+.1f%%", (a / b - 1) * 100}')
        printf '%-9s %-4s %14s %9s %9s %18s %9s %14s\n' "$name" "$t" "$rps" "$rel" "$spr" "$cpu" "$crel" "$upc"
    done
done
