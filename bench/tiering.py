#!/usr/bin/env python3
"""Tiering (`xstream.tier-dir`, issue 30): memory and read cost of a stream whose sealed nodes
are on disk, against the same stream in RAM and the built-in's, on one server.

  python3 bench/tiering.py [--module target/dist/libxstream.so] [--n 200000] [--calls 2000]
                           [--compression off|lz4|zstd]

Fills --n JSON events (bench/compression.py's) into a module stream `m` and a built-in stream
`b`. Phase 1, tiering off: `used_memory` of each stream (the server's, before and after the
fill), then XS.RANGE / XRANGE <random ID> + COUNT 100 (--calls calls each, fixed seed, one at a
time: the client sees each call's latency). Phase 2: `xstream.tier-dir` set, `tier-memory 0`,
every sealed node moved to disk; `used_memory` again; the segment files dropped from the page
cache (posix_fadvise DONTNEED: reads go to the device) and the same reads, cold, then again with
the page cache warm. Each arm: server time per call (INFO commandstats) and each call's server
time from SLOWLOG (threshold 0): p50, p99, max; node reads from disk and their mean time (INFO
xstream). The built-in arm runs in both
phases: a drift between them is the machine, not the module.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compression as cm  # noqa: E402
from serverlib import wait_tier_idle  # noqa: E402
import xbench  # noqa: E402
from xbench import Redis, Server  # noqa: E402


def drop_page_cache(tier_dir: str) -> int:
    n = 0
    for p in glob.glob(os.path.join(tier_dir, "seg-*.xst")):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        finally:
            os.close(fd)
    return n


def reads(c: Redis, cmd: str, key: str, starts: list[int]) -> dict:
    c.call("CONFIG", "RESETSTAT")
    # Every call's server time: SLOWLOG with a threshold of 0 (its µs, as the server measured).
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", str(len(starts) + 10))
    c.call("SLOWLOG", "RESET")
    for s in starts:
        c.call(cmd, key, b"%d" % s, b"+", b"COUNT", b"100")
    log = c.call("SLOWLOG", "GET", str(len(starts) + 10))
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    lat = sorted(int(e[2]) for e in log if e[3][0].upper() == cmd.upper().encode())
    return {
        "server_us": cm.usec_per_call(c, cmd.lower()),
        "p50": lat[len(lat) // 2],
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "max": lat[-1],
    }


def show(name: str, r: dict, extra: str = "") -> None:
    print(f"  {name:34s} {r['server_us']:7.2f} us/call, p50 {r['p50']:5d} us, p99 {r['p99']:5d} us, max {r['max']:6d} us{extra}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(xbench.ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--compression", default="off")
    a = ap.parse_args()
    srv = Server(a.module)
    srv.start()
    c = Redis(srv.port)
    try:
        c.call("CONFIG", "SET", "xstream.compression", a.compression)
        m0 = cm.used(c)
        cm.fill(srv.port, "XS.ADD", "m", a.n)
        m1 = cm.used(c)
        cm.fill(srv.port, "XADD", "b", a.n)
        m2 = cm.used(c)
        mod_ram, builtin = m1 - m0, m2 - m1
        print(f"{a.n} events, compression {a.compression}")
        print(f"  used_memory: built-in {builtin:,} B, module in RAM {mod_ram:,} B ({mod_ram / builtin:.3f} of the built-in)")
        rng = random.Random(7)
        starts = [rng.randrange(1, a.n) for _ in range(a.calls)]
        print("phase 1, tiering off:")
        show("built-in XRANGE", reads(c, "XRANGE", "b", starts))
        show("module in RAM XS.RANGE", reads(c, "XS.RANGE", "m", starts))
        tier_dir = os.path.join(srv.dir, "tier")
        c.call("CONFIG", "SET", "xstream.tier-dir", tier_dir, "xstream.tier-memory", "0")
        t0 = time.time()
        wait_tier_idle(c.info, field="xstream_tier_resident_queued_nodes", timeout_s=600, poll_s=0.05)
        tier_s = time.time() - t0
        x = c.info("xstream")
        m3 = cm.used(c)
        mod_tiered = m3 - m2 + mod_ram
        print(f"phase 2: {x['xstream_tier_disk_nodes']} nodes to disk in {tier_s:.1f} s, "
              f"{int(x['xstream_tier_disk_bytes']):,} B of records")
        print(f"  used_memory: module tiered {mod_tiered:,} B ({mod_tiered / builtin:.3f} of the built-in, "
              f"{mod_tiered / mod_ram:.3f} of in RAM)")
        for label in ("cold (page cache dropped)", "warm (page cache)"):
            if label.startswith("cold"):
                drop_page_cache(tier_dir)
            before = c.info("xstream")
            r = reads(c, "XS.RANGE", "m", starts)
            after = c.info("xstream")
            n = int(after["xstream_tier_cold_reads"]) - int(before["xstream_tier_cold_reads"])
            us = int(after["xstream_tier_cold_read_us"]) - int(before["xstream_tier_cold_read_us"])
            show(f"module tiered, {label}", r, f"   {n} node reads, {us / max(n, 1):.1f} us each")
        show("built-in XRANGE (again)", reads(c, "XRANGE", "b", starts))
        print(f"  read errors {c.info('xstream')['xstream_tier_read_errors']}")
    finally:
        c.close()
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
