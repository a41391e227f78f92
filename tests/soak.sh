#!/usr/bin/env bash
# make soak: the long runs, one part after the other, each with its own log, a summary line per
# part (status, wall time, the counts the tests reported) and the total wall time at the end.
# A failing part does not stop the others; the exit status is 1 when any part failed.
#
#   tests/soak.sh                 every part
#   SOAK_PARTS="fuzz kill9" tests/soak.sh   some of them (names: see PARTS below)
#
# Sizes (environment; the defaults are the documented soak sizes, issue 21):
#   SOAK_RUNS (10) x SOAK_OPS (100,000): differential + group differential seeds on the default host
#     (each run: SOAK_OPS RESP2 + SOAK_OPS/4 RESP3 ops per runner); SOAK_HOST_OPS (50,000) on each
#     host of HOSTS; over 1,000,000 operations in all.
#   XSTREAM_FUZZ_SCALE (10, about 12,000 RESTORE payloads), XSTREAM_FUZZ_TRAFFIC_MS (1000 per payload
#     the server accepted), XSTREAM_KILL9_CYCLES (50), XSTREAM_TRUNCATE_POINTS (200 per file, five
#     files: 1,000 truncated start-ups), the blocking soak (250,000 blocked reads per side), the
#     cluster rounds (10 reshards, 5 failovers, 4 kill -9 of a primary during a reshard), the module-only random workloads of the Redis 8 and
#     queue features at 10x their CI size, and the integration suite under ASan (make test-asan).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
: "${CARGO:=cargo}"
: "${MODULE:=$ROOT/target/dist/libxstream.so}"
: "${HOSTS_SH:=$ROOT/tests/hosts.sh}"
: "${HOSTS:=redis-7.2.4 redis-7.4.1 redis-8.0.2 redis-8.2.3 valkey-8.0.1 valkey-8.1.8 valkey-9.1.2}"
: "${TEST_THREADS:=2}"
: "${SOAK_RUNS:=10}"
: "${SOAK_OPS:=100000}"
: "${SOAK_HOST_OPS:=50000}"
: "${SOAK_LOGS:=$ROOT/target/soak}"
PARTS_ALL="differential hosts wave2 fuzz decoders kill9 truncation robustness blocking cluster asan"
: "${SOAK_PARTS:=$PARTS_ALL}"
export XSTREAM_MODULE=$MODULE
# Soak sizes make restarts load large AOFs / RDBs on a loaded machine: a longer allowance
# for a server's first PONG than the harness's default 10 s.
export XSTREAM_START_TIMEOUT_S=${XSTREAM_START_TIMEOUT_S:-120}
mkdir -p "$SOAK_LOGS"

t() { cargo_args=("$@"); $CARGO test --release "${cargo_args[@]}"; }

# A failing run does not stop the part: every seed runs, and the part fails at the end.
part_differential() {
    local rc=0
    for i in $(seq 1 "$SOAK_RUNS"); do
        echo "run $i/$SOAK_RUNS"
        XSTREAM_DIFF_OPS=$SOAK_OPS XSTREAM_DIFF_OPS3=$((SOAK_OPS / 4)) XSTREAM_DIFF_SEGMENTS=20 \
        XSTREAM_HOSTILE_CASES=20000 \
            t --no-fail-fast --test differential --test hostile -- --test-threads="$TEST_THREADS" || rc=1
        XSTREAM_GDIFF_OPS=$SOAK_OPS XSTREAM_GDIFF_OPS3=$((SOAK_OPS / 4)) \
            t --test differential_groups -- --test-threads="$TEST_THREADS" || rc=1
    done
    return $rc
}

part_hosts() {
    local rc=0
    for h in $HOSTS; do
        local srv
        srv=$("$HOSTS_SH" server "$h") || { "$HOSTS_SH" fetch "$h" && srv=$("$HOSTS_SH" server "$h"); } ||
            { echo "host $h: SKIPPED: $("$HOSTS_SH" why "$h")"; rc=1; continue; }
        echo "host $h"
        XSTREAM_REDIS_SERVER=$srv XSTREAM_DIFF_OPS=$SOAK_HOST_OPS XSTREAM_DIFF_OPS3=$((SOAK_HOST_OPS / 4)) \
        XSTREAM_GDIFF_OPS=$SOAK_HOST_OPS XSTREAM_GDIFF_OPS3=$((SOAK_HOST_OPS / 4)) \
        XSTREAM_TDIFF_OPS=$SOAK_HOST_OPS XSTREAM_TDIFF_OPS3=$((SOAK_HOST_OPS / 4)) \
        XSTREAM_TGDIFF_OPS=$SOAK_HOST_OPS XSTREAM_TGDIFF_OPS3=$((SOAK_HOST_OPS / 4)) \
            t --no-fail-fast --test differential --test differential_groups --test takeover -- --test-threads="$TEST_THREADS" || rc=1
    done
    return $rc
}

# The features without a built-in twin (NACK, CLAIM, IDMP, policies, retention, compaction,
# compression, delayed delivery): their random workloads and kill -9 tests at larger sizes.
part_wave2() {
    local tests=()
    for f in redis8_combined redis8_nack redis8_claim redis8_idmp queue_policy queue_hostile retention compact delayed; do
        [ -f "tests/$f.rs" ] && tests+=(--test "$f")
    done
    local rc=0
    XSTREAM_COMBINED_OPS=60000 XSTREAM_NACK_OPS=15000 CLAIM_RANDOM_OPS=30000 XSTREAM_WAVE2_SCALE=10 \
    XSTREAM_KILL9_CYCLES=${XSTREAM_KILL9_CYCLES:-50} \
        t --no-fail-fast "${tests[@]}" -- --test-threads=1 || rc=1
    XSTREAM_FUZZ_COMPRESSION=1 XSTREAM_FUZZ_SCALE=2 XSTREAM_FUZZ_TRAFFIC_MS=200 \
        t --test restore_fuzz -- --test-threads=1 || rc=1
    return $rc
}

part_fuzz() {
    XSTREAM_FUZZ_SCALE=${XSTREAM_FUZZ_SCALE:-10} XSTREAM_FUZZ_TRAFFIC_MS=${XSTREAM_FUZZ_TRAFFIC_MS:-1000} \
        t --test restore_fuzz -- --test-threads=1
}

# The cargo-fuzz targets of the two doors for whole untrusted values (issue 32): rdb_load (our
# encoding, every version, seeded with tests/fixtures) and native_dump (the built-in's DUMP
# payloads), SOAK_DECODER_SECONDS each (default 600), one after the other on one core each
# (-jobs would share the corpus). A finding is written to fuzz/artifacts/<target>/.
part_decoders() {
    local rc=0
    command -v cargo-fuzz >/dev/null 2>&1 || $CARGO install cargo-fuzz || return 1
    python3 fuzz/seeds.py || return 1
    for target in rdb_load native_dump; do
        (cd fuzz && RUSTC_BOOTSTRAP=1 $CARGO fuzz run "$target" -- -max_total_time="${SOAK_DECODER_SECONDS:-600}" \
            -print_final_stats=1) || rc=1
    done
    return $rc
}

part_kill9() {
    # 50 cycles grow the AOF past 600,000 entries in 20 incr files (soak run 1: the default
    # 10 s start-up allowance was too short; the 120 s above applies).
    XSTREAM_KILL9_CYCLES=${XSTREAM_KILL9_CYCLES:-50} \
        t --test crash_recovery -- --test-threads=1 kill9
}

part_truncation() {
    XSTREAM_TRUNCATE_POINTS=${XSTREAM_TRUNCATE_POINTS:-200} \
        t --test crash_recovery -- --test-threads=1 truncated
}

part_robustness() {
    XSTREAM_HOSTILE_NAME_MB=${XSTREAM_HOSTILE_NAME_MB:-512} \
        t --no-fail-fast --test hostile_inputs --test oom --test acl -- --test-threads=1
}

part_blocking() {
    XSTREAM_BLOCK_SOAK=1 t --test blocking_soak -- --nocapture
}

part_cluster() {
    XSTREAM_RESHARD_ROUNDS=${XSTREAM_RESHARD_ROUNDS:-10} XSTREAM_RESHARD_OPS=${XSTREAM_RESHARD_OPS:-50000} \
    XSTREAM_FAILOVER_ROUNDS=${XSTREAM_FAILOVER_ROUNDS:-5} XSTREAM_CLUSTER_ENTRIES=${XSTREAM_CLUSTER_ENTRIES:-100000} \
    XSTREAM_RESHARD_KILL_ROUNDS=${XSTREAM_RESHARD_KILL_ROUNDS:-4} \
        t --test cluster -- --test-threads=1
}

part_asan() {
    make --no-print-directory test-asan
}

# What a part's log says in a summary: the tests' report lines (counts), test result lines.
digest() {
    grep -E '^(test result:|[A-Za-z0-9_ ()./-]+: .*[0-9])' "$1" \
        | grep -vE '^(test [a-z_:]+ \.\.\.|warning:|error(\[|:)|note:|  -->|Running|running|Finished|Compiling)' \
        | sed 's/^/    /' | tail -n "${SOAK_DIGEST_LINES:-12}"
}

start=$(date +%s)
failed=0
summary=()
for p in $SOAK_PARTS; do
    case " $PARTS_ALL " in *" $p "*) ;; *) echo "soak: unknown part $p (parts: $PARTS_ALL)"; exit 2 ;; esac
    log=$SOAK_LOGS/$p.log
    echo "== soak: $p (log: $log)"
    t0=$(date +%s)
    "part_$p" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    if [ $rc -eq 0 ]; then status=ok; else status="FAILED (exit $rc)"; failed=$((failed + 1)); fi
    line="soak: $p: $status in ${secs} s"
    echo "$line"
    digest "$log"
    summary+=("$line")
done
total=$(( $(date +%s) - start ))
echo
echo "== soak summary"
for l in "${summary[@]}"; do echo "$l"; done
printf 'soak: total wall time %d s (%dh%02dm), %d part(s), %d failed\n' "$total" $((total / 3600)) $((total % 3600 / 60)) \
    "${#summary[@]}" "$failed"
[ "$failed" -eq 0 ]
