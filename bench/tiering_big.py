#!/usr/bin/env python3
"""Issue 30's figures: a large stream with `xstream.tier-memory 64mb` against the same stream
untiered and the built-in's, side by side on two servers of one run.

  python3 bench/tiering_big.py [--module target/dist/libxstream.so] [--n 20000000] [--budget 64mb]

Server T: the module with `xstream.tier-dir` and `xstream.tier-memory --budget`, stream `m`.
Server U: the same module without tiering, stream `m`.
Server B: the built-in stream `b` (a server of its own: a 4 GB neighbour would slow U's
commands through the memory they share, as a first version of this script measured).
Each gets --n JSON events of ~200 bytes (bench/compression.py's), the same on both. Then:
  1. used_memory: T's (the tiered stream) against U's built-in stream, and U's module stream;
  2. XS.ADD on T against U: server time per call (INFO commandstats), 5 interleaved reps of
     20,000 adds each;
  3. tail reads, XS.RANGE <an ID among the last 10,000> + COUNT 100, T against U (5 reps), sent
     500 at a time: at that depth Redis's reply blocks page-fault per call, as many as the
     allocator's history decides (bench/tier_tail_big.py measures depths 1 and 20 too);
  4. cold reads on T, XS.RANGE <random ID> + COUNT 100, with the segment files dropped from the
     page cache first (posix_fadvise DONTNEED): per-call server time from SLOWLOG, p50 / p99 /
     max; the same reads on U for reference;
  5. a consumer group catching up from the start: XS.READGROUP COUNT 100 `>` over the first
     --catchup entries, T (page cache dropped) against U: entries per second of server time.
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
import xbench  # noqa: E402
from serverlib import wait_tier_idle  # noqa: E402
from xbench import Redis, Server, enc  # noqa: E402


def drop_page_cache(tier_dir: str) -> None:
    for p in glob.glob(os.path.join(tier_dir, "seg-*.xst")):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def per_call(c: Redis, cmd: str, calls: list[tuple]) -> float:
    c.call("CONFIG", "RESETSTAT")
    for lo in range(0, len(calls), 500):
        chunk = calls[lo:lo + 500]
        c.send(b"".join(enc(*a) for a in chunk))
        for _ in chunk:
            r = c.read_reply()
            if isinstance(r, Exception):
                raise r
    return cm.usec_per_call(c, cmd)


def slowlog_reads(c: Redis, calls: list[tuple]) -> list[int]:
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", str(len(calls) + 10))
    c.call("SLOWLOG", "RESET")
    for a in calls:
        c.call(*a)
    log = c.call("SLOWLOG", "GET", str(len(calls) + 10))
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    return sorted(int(e[2]) for e in log if e[3][0].upper() == calls[0][0].upper().encode())


def pct(xs: list[int], p: float) -> int:
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(xbench.ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--n", type=int, default=20_000_000)
    ap.add_argument("--budget", default="64mb")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--catchup", type=int, default=1_000_000)
    a = ap.parse_args()
    t_srv, u_srv, b_srv = Server(a.module), Server(a.module), Server(a.module)
    t_srv.start()
    u_srv.start()
    b_srv.start()
    t, u, bc = Redis(t_srv.port), Redis(u_srv.port), Redis(b_srv.port)
    tier_dir = os.path.join(t_srv.dir, "tier")
    try:
        t.call("CONFIG", "SET", "xstream.tier-dir", tier_dir, "xstream.tier-memory", a.budget)
        t0 = cm.used(t)
        u0 = cm.used(u)
        step = 1_000_000
        started = time.time()
        for lo in range(0, a.n, step):
            k = min(step, a.n - lo)
            cm.fill(t_srv.port, "XS.ADD", "m", k, start=lo)
            cm.fill(u_srv.port, "XS.ADD", "m", k, start=lo)
            print(f"  filled {lo + k:,} of {a.n:,} ({time.time() - started:.0f} s)", file=sys.stderr)
        u1 = cm.used(u)
        b0 = cm.used(bc)
        for lo in range(0, a.n, step):
            cm.fill(b_srv.port, "XADD", "b", min(step, a.n - lo), start=lo)
        b1 = cm.used(bc)
        wait_tier_idle(t.info, int(t.call("CONFIG", "GET", "xstream.tier-memory")[1]), timeout_s=1800)
        t1 = cm.used(t)
        x = t.info("xstream")
        builtin, mod_u, mod_t = b1 - b0, u1 - u0, t1 - t0
        print(f"{a.n:,} events of ~200 bytes; tier-memory {a.budget}")
        print(f"1. used_memory: built-in {builtin:,} B; module untiered {mod_u:,} B ({mod_u / builtin:.3f}); "
              f"module tiered {mod_t:,} B ({mod_t / builtin:.3f} of the built-in's)")
        print(f"   on disk: {int(x['xstream_tier_disk_nodes']):,} nodes, {int(x['xstream_tier_disk_bytes']):,} B of records; "
              f"in RAM (queued sealed nodes) {int(x['xstream_tier_resident_queued_bytes']):,} B")
        # 2. XS.ADD, interleaved.
        add_t, add_u = [], []
        nxt = a.n
        for rep in range(5):
            for srv, c, out in ((t_srv, t, add_t), (u_srv, u, add_u)) if rep % 2 == 0 else ((u_srv, u, add_u), (t_srv, t, add_t)):
                rng = random.Random(rep)
                calls = [("XS.ADD", "m", b"%d-0" % (nxt + i + 1), "event", cm.event(rng, nxt + i)) for i in range(20_000)]
                out.append(per_call(c, "xs.add", calls))
            nxt += 20_000
        mt, mu = statistics.median(add_t), statistics.median(add_u)
        print(f"2. XS.ADD: tiered {mt:.2f} us/call, untiered {mu:.2f}: ratio {mt / mu:.3f} "
              f"(reps {['%.2f' % v for v in add_t]} / {['%.2f' % v for v in add_u]})")
        # 3. Tail reads.
        rng = random.Random(3)
        tail = [("XS.RANGE", "m", b"%d" % rng.randrange(nxt - 10_000, nxt - 100), "+", "COUNT", "100") for _ in range(5_000)]
        tr_t, tr_u = [], []
        for rep in range(5):
            for c, out in ((t, tr_t), (u, tr_u)) if rep % 2 == 0 else ((u, tr_u), (t, tr_t)):
                out.append(per_call(c, "xs.range", tail))
        mt, mu = statistics.median(tr_t), statistics.median(tr_u)
        print(f"3. tail reads (XS.RANGE COUNT 100 in the last 10,000): tiered {mt:.2f} us/call, untiered {mu:.2f}: ratio {mt / mu:.3f}")
        # 4. Cold reads.
        rng = random.Random(4)
        cold = [("XS.RANGE", "m", b"%d" % rng.randrange(1, a.n), "+", "COUNT", "100") for _ in range(a.reads)]
        drop_page_cache(tier_dir)
        before = t.info("xstream")
        lt = slowlog_reads(t, cold)
        after = t.info("xstream")
        lu = slowlog_reads(u, cold)
        n = int(after["xstream_tier_cold_reads"]) - int(before["xstream_tier_cold_reads"])
        us = int(after["xstream_tier_cold_read_us"]) - int(before["xstream_tier_cold_read_us"])
        print(f"4. XS.RANGE <random> + COUNT 100, {a.reads} calls: tiered, page cache dropped: p50 {pct(lt, .5)} us, "
              f"p99 {pct(lt, .99)} us, max {lt[-1]} us ({n} node reads, {us / max(n, 1):.1f} us each); "
              f"untiered p50 {pct(lu, .5)} us, p99 {pct(lu, .99)} us")
        # 5. A group catching up from the start.
        rates = {}
        for name, c in (("tiered", t), ("untiered", u)):
            c.call("XS.GROUP", "CREATE", "m", "g", "0")
            if name == "tiered":
                drop_page_cache(tier_dir)
            calls = [("XS.READGROUP", "GROUP", "g", "c", "COUNT", "100", "STREAMS", "m", ">")] * (a.catchup // 100)
            us_call = per_call(c, "xs.readgroup", calls)
            rates[name] = 100 / us_call * 1e6
        print(f"5. a group catching up (XS.READGROUP COUNT 100 >, {a.catchup:,} entries): tiered {rates['tiered']:,.0f} entries/s, "
              f"untiered {rates['untiered']:,.0f}: {rates['tiered'] / rates['untiered']:.2f} of the in-RAM rate")
        print(f"   read errors {t.info('xstream')['xstream_tier_read_errors']}")
    finally:
        t.close()
        u.close()
        bc.close()
        t_srv.stop()
        u_srv.stop()
        b_srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
