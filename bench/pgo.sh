#!/usr/bin/env bash
# Profile-guided optimisation of the module as shipped (`make pgo`): writes the training profile
# that `make build` hands to rustc (-Cprofile-use), bench/pgo/xstream.profdata.gz, and the
# toolchain it was made with, bench/pgo/toolchain.
#
# 1. An instrumented build (-Cprofile-generate) of the dist profile into target/pgo-gen, built as
#    `make build` builds (no --target): the profile names functions by their mangled symbols,
#    whose hash changes with an explicit --target, and a profile of other names is silently
#    unused. The build scripts and proc macros are instrumented too and write their counters
#    while the build runs: those are removed before the training.
# 2. The training run: `bench/xbench.py --quick` with that build, the same workloads as `make
#    bench` at smaller sizes (XADD forms, XRANGE / XREVRANGE, XREADGROUP + XACK, XPENDING,
#    XAUTOCLAIM, XDEL, XTRIM, compressed reads, SAVE, RDB load, RESTORE). The server writes the
#    counters when it exits (SHUTDOWN, an atexit handler of the profiling runtime in the module).
#    The run's own result file is removed: an instrumented build's figures mean nothing.
# 3. llvm-profdata of rustc's own LLVM major version (Debian's package llvm-N, installed if
#    missing) merges the counters into the indexed profile, gzipped (-n: the same bytes for the
#    same profile).
#
# What the profile does (docs/BENCHMARKS.md, bench/analysis.md): LLVM lays out the hot blocks of
# each function together and the cold ones (errors, rare branches) out of line, and inlines by
# measured frequency. XS.ADD under callgrind: 9,265 -> 8,341 instructions, 392 -> 188 first-level
# instruction-cache misses per command.
#
# A profile goes stale as the code changes: a function whose control flow changed is compiled
# without its counts (rustc says nothing), the rest keep theirs. Run `make pgo` again after
# changes to a hot path, and before `make bench`.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
[ -n "$llvm_major" ] || { echo "make pgo: cannot read rustc -vV" >&2; exit 1; }
profdata=$(command -v "llvm-profdata-$llvm_major" || true)
if [ -z "$profdata" ]; then
    sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    echo "make pgo: installing llvm-$llvm_major (llvm-profdata of rustc's LLVM, $llvm_major)"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "llvm-$llvm_major" >/dev/null
    profdata=$(command -v "llvm-profdata-$llvm_major")
fi

gen=$PWD/target/pgo-gen
raw=$gen/raw
rm -rf "$raw"
echo "make pgo: instrumented build (target/pgo-gen)"
RUSTFLAGS="-Cprofile-generate=$raw" "$CARGO" build --profile dist --target-dir "$gen"
rm -rf "$raw"

echo "make pgo: training run (bench/xbench.py --quick)"
before=$(ls bench/results)
python3 bench/xbench.py --quick --no-docs --module "$gen/dist/libxstream.so"
for f in $(comm -13 <(echo "$before") <(ls bench/results)); do rm -f "bench/results/$f"; done

ls "$raw"/*.profraw >/dev/null
"$profdata" merge -o "$gen/xstream.profdata" "$raw"/*.profraw
mkdir -p bench/pgo
gzip -9 -n -c "$gen/xstream.profdata" >bench/pgo/xstream.profdata.gz
{
    echo "$llvm_major"
    rustc -V
} >bench/pgo/toolchain
echo "make pgo: bench/pgo/xstream.profdata.gz ($(stat -c %s bench/pgo/xstream.profdata.gz) bytes," \
    "$("$profdata" show "$gen/xstream.profdata" | sed -n 's/^Total functions: //p') functions), made with $(rustc -V)"
