#!/usr/bin/env bash
# The invariants of ARCHITECTURE.md that the compiler and clippy do not check, as text rules over
# src/ (`make lint` runs this after cargo fmt --check and cargo clippy). Each violation is printed
# as file:line: text, with the rule; exit 1 if any.
#
# Layers, arrows pointing down only:
#   lib.rs -> commands, jobs -> ops -> ffi (safe surface) -> core (rax, listpack, stream, tier, rdb, native)
# - the core names nothing above it, no redis_module, no unsafe;
# - ffi never names commands, ops or jobs (it defines traits - Waiter, Job - that they implement);
# - ops never name commands or jobs; jobs never name commands; commands never name jobs;
# - commands, ops and jobs never touch the module API (redis_module, raw pointers, .raw()) and
#   write no unsafe code (the entry points command_entry! defines are ffi's);
# - no file under src/commands is over 700 lines;
# - nothing subscribes to the event loop's turns (REDISMODULE_EVENT_EVENTLOOP): Redis would build a
#   context with a temporary client for the module twice per turn, which every command of the
#   server pays (a GET from one client: 4,927 instructions without the module, 6,541 with such a
#   subscription); deferred work arms a module timer when there is some (src/ffi/blocking.rs).
#
# `tests/lint.sh --self-test` shows the checks can fail: in a copy of the tree it adds an upward
# import to src/ffi (this script must fail) and an unwrap() to the core (clippy must fail).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--self-test" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp -r Cargo.toml Cargo.lock clippy.toml rustfmt.toml src tests benches "$tmp"/
    ok=1
    printf '\npub fn lint_probe() -> usize {\n    crate::commands::cstr(b"x").len()\n}\n' >>"$tmp/src/ffi/fence.rs"
    if "$tmp/tests/lint.sh" >/dev/null 2>&1; then
        echo "lint self-test: an upward import in src/ffi was not caught"
        ok=0
    fi
    cp src/ffi/fence.rs "$tmp/src/ffi/fence.rs"
    printf '\npub fn lint_probe(s: &str) -> u64 {\n    s.parse().unwrap()\n}\n' >>"$tmp/src/stream/id.rs"
    # Deps are built once into target/lint-probe (kept between runs); then only the copy builds.
    out=$(cd "$tmp" && CARGO_TARGET_DIR="$OLDPWD/target/lint-probe" cargo clippy --quiet --release --lib -- -D warnings 2>&1)
    if ! grep -q 'unwrap_used' <<<"$out"; then
        echo "lint self-test: an unwrap() in src/stream was not caught"
        ok=0
    fi
    if [ "$ok" = 1 ]; then
        echo "lint self-test: an upward import and an unwrap() both fail the lint"
        exit 0
    fi
    exit 1
fi

status=0
fail() { # rule, grep output
    if [ -n "$2" ]; then
        echo "lint: $1"
        echo "$2" | sed 's/^/    /'
        status=1
    fi
}
# Code lines only: drop // comments (whole-line and doc) before matching.
code_grep() { # pattern, paths...
    local pat=$1
    shift
    grep -rnE --include='*.rs' "$pat" "$@" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*//' || true
}

core=(src/rax src/listpack src/stream src/tier src/rdb.rs src/native.rs)

fail "the core names a layer above it (crate::ffi/commands/ops/jobs/config/error)" \
    "$(code_grep 'crate::(ffi|commands|ops|jobs|config|error)\b' "${core[@]}")"
fail "the core uses the module API" "$(code_grep 'redis_module' "${core[@]}")"
fail "ffi names commands, ops or jobs" "$(code_grep 'crate::(commands|ops|jobs)\b' src/ffi)"
fail "ops name commands or jobs" "$(code_grep 'crate::(commands|jobs)\b' src/ops)"
fail "jobs name commands" "$(code_grep 'crate::commands\b' src/jobs)"
fail "commands name jobs" "$(code_grep 'crate::jobs\b' src/commands)"
fail "commands, ops or jobs use the module API or raw contexts" \
    "$(code_grep 'redis_module|\.raw\(\)|\*mut |\*const ' src/commands src/ops src/jobs)"
fail "unsafe code outside src/ffi" \
    "$(code_grep '\bunsafe\b' src --exclude-dir=ffi | grep -vE '(forbid|deny)\(unsafe_code\)')"

fail "a subscription to every turn of the event loop (use a module timer armed when there is work)" \
    "$(code_grep 'REDISMODULE_EVENT_EVENTLOOP' src)"

long=$(find src/commands -name '*.rs' -print0 | xargs -0 wc -l | awk '$2 != "total" && $1 > 700 { print $2 ": " $1 " lines" }')
fail "a file under src/commands is over 700 lines" "$long"

if [ "$status" = 0 ]; then
    echo "lint: layers, unsafe, event-loop subscriptions and file sizes: ok"
fi
exit "$status"
