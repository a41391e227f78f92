#!/usr/bin/env bash
# The comparison runners on every host of the matrix (`make test-matrix`, the end of `make test`):
# MATRIX_TESTS (cargo test arguments) against each host's own built-in streams, MATRIX_JOBS hosts
# at a time, each into its own log, printed whole when that host is done. Then redis-cli 7.2's
# argument hints. A host that could not be installed is SKIPPED (named, not failed); a failing host
# does not stop the others. The summary has a line per host: "make test-matrix: HOST | ok / FAILED
# / SKIPPED (why) | seconds".
#
# Why several at once: one host's run is mostly waiting (servers starting, timers coming due, the
# runners' round trips): measured on the 2-core CI machine, 125 s of wall time for 44 s of CPU.
# Every test picks its own free ports and directories, and cargo takes no lock to run built tests.
#
# Environment (set by the Makefile): HOSTS, HOSTS_SH, MATRIX_TESTS, MATRIX_JOBS, TEST_THREADS,
# CARGO, VENV, XSTREAM_MODULE, XSTREAM_TEST_HOOKS_MODULE.
set -uo pipefail

jobs=${MATRIX_JOBS:-3}
logs=$(mktemp -d "${TMPDIR:-/tmp}/xstream-matrix-XXXXXX")
trap 'rm -rf "$logs"' EXIT
read -r -a tests <<<"$MATRIX_TESTS"

declare -A started result
summary=()
status=0

# One host: its server binary in $2; output to its log, "ok"/"FAILED" and the seconds to its
# result file.
run_host() {
    local h=$1 srv=$2 t0 r
    t0=$(date +%s)
    if XSTREAM_REDIS_SERVER=$srv XSTREAM_TIER_FUZZ_CASES=2000 \
        "$CARGO" test --release --no-fail-fast "${tests[@]}" -- --test-threads="$TEST_THREADS" \
        >"$logs/$h.log" 2>&1; then r=ok; else r=FAILED; fi
    echo "$r $(($(date +%s) - t0))" >"$logs/$h.result"
}

# A finished host: its log, then its result.
report() {
    local h=$1 r s
    echo "make test-matrix: $h (${started[$h]})"
    cat "$logs/$h.log"
    read -r r s <"$logs/$h.result" || { r=FAILED; s=0; }
    result[$h]="$r | $s s"
    [ "$r" = ok ] || status=1
}

# The tests are built once, before any host runs (the hosts would otherwise race to build them).
"$CARGO" test --release --no-run "${tests[@]}" 2>&1 | tail -1 || status=1

declare -A pid_host
running=0
# `wait -n` also returns jobs that ended before it was called, one per call.
next_done() {
    local done_pid
    wait -n -p done_pid
    report "${pid_host[$done_pid]}"
    running=$((running - 1))
}
for h in $HOSTS; do
    if ! srv=$("$HOSTS_SH" server "$h"); then
        result[$h]="SKIPPED: $("$HOSTS_SH" why "$h") | 0 s"
        continue
    fi
    while ((running >= jobs)); do next_done; done
    started[$h]=$("$srv" --version | head -1)
    echo "make test-matrix: $h started"
    run_host "$h" "$srv" &
    pid_host[$!]=$h
    running=$((running + 1))
done
while ((running > 0)); do next_done; done

if cli=$("$HOSTS_SH" server redis-7.2.4); then
    echo "make test-matrix: redis-cli 7.2 argument hints (tests/cli_hints.py)"
    if XSTREAM_CLI_HOST_DIR=$(dirname "$cli") "$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/cli_hints.py; then
        cli_result=ok
    else
        cli_result=FAILED
        status=1
    fi
else
    cli_result="SKIPPED: host redis-7.2.4 missing"
fi

for h in $HOSTS; do
    summary+=("make test-matrix: $h | ${result[$h]:-FAILED: not run | 0 s}")
done
summary+=("make test-matrix: redis-cli 7.2.4 hints | $cli_result")
printf '%s\n' "${summary[@]}"
exit $status
