#!/usr/bin/env python3
"""Issue 30's tail-read line at full size, with an A/A pair, before and after a reload of every
server: is what tiered tail reads lose at 20M entries tiering's own cost, or the allocator's
state after gigabytes of nodes went to disk?

  .venv/bin/python bench/tier_tail_big.py [--module target/dist/libxstream.so] [--n 20000000]
                                          [--budget 64mb] [--reps 12] [--calls 5000]
                                          [--pipelines 500,20,1] [--purge] [--tier-after-fill]
                                          [--reload T,U1,U2]

Three servers of one run, each with the module: `T` with `xstream.tier-dir` and
`xstream.tier-memory --budget`, `U1` and `U2` untiered (U1 against U2 is the A/A: how far two
servers doing the same work drift apart on this machine). Each gets the same --n JSON events of
~200 bytes (bench/compression.py's) in `m`, generated once per batch and sent to all three.

Two phases, each at every pipeline depth of --pipelines: --reps reps in rotating server order, a
rep being --calls `XS.RANGE m <an ID among the last 10,000> + COUNT 100` (no node of these is on
disk) sent that many at a time, the server time per call from INFO commandstats and the minor page
faults per call (/proc/<pid>/stat). The depth matters: each reply is ~22 KB, and Redis holds a
pipeline's replies until it writes them, so 500 at a time is ~11 MB of reply blocks per batch,
whose pages are faulted in again batch after batch (4-6 minor faults per call at 500, about none
at 20, for the built-in's XRANGE and XS.RANGE alike on a 200,000-entry stream).
  1. live: after the fill, once T's tiering step is idle;
  2. reloaded: after `DEBUG RELOAD` on all three (or those --reload names) (T tiers while it loads, so its newest nodes are
     allocated side by side, as an untiered load allocates all of them).
With --tier-after-fill, T fills with nothing tiered and gets its budget after: the same nodes go
to disk, but its newest nodes sit where an untiered fill puts them (the live phase then separates
where T's memory sits from what a tiered read does).
Before each phase, each server's allocator state (INFO memory's allocator_* and jemalloc's dirty
and muzzy pages), after a MEMORY PURGE with --purge. Each phase prints the medians' ratios and
the median of the reps' own ratios (a rep's three servers run within seconds of each other).
Prints each rep, and per phase the medians and the ratios T/U1, T/U2 and U1/U2.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compression as cm  # noqa: E402
import xbench  # noqa: E402
from serverlib import wait_tier_idle  # noqa: E402
from xbench import Redis, Server, enc  # noqa: E402


def minflt(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        # Field 10 (minflt), counted after the command name, which is in parentheses.
        return int(f.read().rsplit(")", 1)[1].split()[7])


def fill(conns: list[Redis], n: int, seed: int = 18) -> None:
    rng = random.Random(seed)
    batch = 2000
    started = time.time()
    for lo in range(0, n, batch):
        hi = min(lo + batch, n)
        payload = b"".join(enc("XS.ADD", "m", b"%d-0" % (i + 1), b"event", cm.event(rng, i)) for i in range(lo, hi))
        for c in conns:
            c.send(payload)
        for c in conns:
            for _ in range(hi - lo):
                r = c.read_reply()
                if isinstance(r, Exception):
                    raise r
        if hi % 1_000_000 == 0:
            print(f"  filled {hi:,} of {n:,} ({time.time() - started:.0f} s)", file=sys.stderr)


def tier_idle(t: Redis) -> None:
    wait_tier_idle(t.info, int(t.call("CONFIG", "GET", "xstream.tier-memory")[1]), timeout_s=1800)
    time.sleep(1)


def rep(c: Redis, pid: int, calls: list[tuple], depth: int) -> tuple[float, float]:
    c.call("CONFIG", "RESETSTAT")
    f0 = minflt(pid)
    for lo in range(0, len(calls), depth):
        chunk = calls[lo:lo + depth]
        c.send(b"".join(enc(*a) for a in chunk))
        for _ in chunk:
            r = c.read_reply()
            if isinstance(r, Exception):
                raise r
    faults = (minflt(pid) - f0) / len(calls)
    return cm.usec_per_call(c, "xs.range"), faults


def allocator(servers: list[tuple[str, Redis, int]], purge: bool) -> None:
    """The allocator's state per server (INFO memory, and jemalloc's dirty and muzzy pages from
    MEMORY MALLOC-STATS), after MEMORY PURGE first with --purge."""
    for label, c, _ in servers:
        if purge:
            c.call("MEMORY", "PURGE")
        m = c.info("memory")
        stats = c.call("MEMORY", "MALLOC-STATS")
        pages = {}
        for line in (stats.decode() if isinstance(stats, bytes) else str(stats)).splitlines():
            w = line.split()
            # "dirty: <decay ms> <npages> <sweeps> <madvises> <purged>": the first such line is
            # the merged arenas'.
            if len(w) >= 6 and w[0] in ("dirty:", "muzzy:") and w[0] not in pages:
                pages[w[0]] = f"{w[2]} (purged so far {w[5]})"
        print(f"  {label}: allocator allocated {int(m['allocator_allocated']):,}, active {int(m['allocator_active']):,}, "
              f"resident {int(m['allocator_resident']):,} B; rss {int(m['used_memory_rss']):,} B; "
              f"dirty {pages.get('dirty:', '?')}, muzzy {pages.get('muzzy:', '?')} pages{' (after MEMORY PURGE)' if purge else ''}")
    if purge:
        time.sleep(1)


def phase(name: str, servers: list[tuple[str, Redis, int]], calls: list[tuple], reps: int, depth: int) -> None:
    name = f"{name}, pipeline {depth}"
    us: dict[str, list[float]] = {s[0]: [] for s in servers}
    flt: dict[str, list[float]] = {s[0]: [] for s in servers}
    for r in range(reps):
        order = servers[r % 3:] + servers[:r % 3]
        for label, c, pid in order:
            u, f = rep(c, pid, calls, depth)
            us[label].append(u)
            flt[label].append(f)
        print(f"  {name} rep {r + 1}: " + ", ".join(f"{s[0]} {us[s[0]][-1]:.2f} us ({flt[s[0]][-1]:.2f} faults)" for s in servers),
              file=sys.stderr)
    # Every rep's servers run within a second of each other, so each rep's ratio drifts less than
    # the medians do (this machine's speed moves by 20-40% within a run).
    paired = {p: statistics.median(a / b for a, b in zip(us[p[0]], us[p[1]])) for p in (("T", "U1"), ("T", "U2"), ("U1", "U2"))}
    med = {k: statistics.median(v) for k, v in us.items()}
    mf = {k: statistics.median(v) for k, v in flt.items()}
    print(f"{name}: medians T {med['T']:.2f}, U1 {med['U1']:.2f}, U2 {med['U2']:.2f} us/call; "
          f"T/U1 {med['T'] / med['U1']:.3f}, T/U2 {med['T'] / med['U2']:.3f}, A/A U1/U2 {med['U1'] / med['U2']:.3f}; "
          f"minor faults per call T {mf['T']:.2f}, U1 {mf['U1']:.2f}, U2 {mf['U2']:.2f}")
    print(f"  paired: median of the reps' T/U1 {paired['T', 'U1']:.3f}, T/U2 {paired['T', 'U2']:.3f}, A/A U1/U2 {paired['U1', 'U2']:.3f}")
    print(f"  reps T {['%.1f' % v for v in us['T']]}")
    print(f"  reps U1 {['%.1f' % v for v in us['U1']]}")
    print(f"  reps U2 {['%.1f' % v for v in us['U2']]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(xbench.ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--n", type=int, default=20_000_000)
    ap.add_argument("--budget", default="64mb")
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--pipelines", default="500,20,1")
    ap.add_argument("--purge", action="store_true", help="MEMORY PURGE on every server before each phase")
    ap.add_argument("--reload", default="T,U1,U2", help="the servers DEBUG RELOADed before phase 2")
    ap.add_argument("--tier-after-fill", action="store_true",
                    help="T fills with nothing tiered and gets --budget after: its newest nodes stay where an "
                         "untiered fill puts them, and the older ones go to disk")
    a = ap.parse_args()
    srv = {k: Server(a.module) for k in ("T", "U1", "U2")}
    for s in srv.values():
        s.start()
    conn = {k: Redis(s.port) for k, s in srv.items()}
    try:
        t = conn["T"]
        t.call("CONFIG", "SET", "xstream.tier-dir", os.path.join(srv["T"].dir, "tier"),
               "xstream.tier-memory", "100gb" if a.tier_after_fill else a.budget)
        fill(list(conn.values()), a.n)
        if a.tier_after_fill:
            t.call("CONFIG", "SET", "xstream.tier-memory", a.budget)
        tier_idle(t)
        x = t.info("xstream")
        print(f"{a.n:,} events of ~200 bytes; T: tier-memory {a.budget}, {int(x['xstream_tier_disk_nodes']):,} nodes on disk; "
              f"used_memory T {int(t.info('memory')['used_memory']):,} B, U1 {int(conn['U1'].info('memory')['used_memory']):,} B")
        rng = random.Random(3)
        calls = [("XS.RANGE", "m", b"%d" % rng.randrange(a.n - 10_000, a.n - 100), "+", "COUNT", "100") for _ in range(a.calls)]
        servers = [(k, conn[k], srv[k].proc.pid) for k in ("T", "U1", "U2")]
        depths = [int(d) for d in a.pipelines.split(",")]
        allocator(servers, a.purge)
        for d in depths:
            phase("1. live", servers, calls, a.reps, d)
        for k in a.reload.split(","):
            t0 = time.time()
            conn[k].call("DEBUG", "RELOAD")
            print(f"  DEBUG RELOAD {k}: {time.time() - t0:.1f} s", file=sys.stderr)
        tier_idle(t)
        allocator(servers, a.purge)
        for d in depths:
            phase("2. reloaded", servers, calls, a.reps, d)
        print(f"  T read errors {t.info('xstream')['xstream_tier_read_errors']}, cold reads {t.info('xstream')['xstream_tier_cold_reads']}")
    finally:
        for c in conn.values():
            c.close()
        for s in srv.values():
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
