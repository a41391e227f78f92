#!/usr/bin/env python3
"""Tail reads with tiering on, against the same stream untiered (issue 30's "tail reads within
1.02 of untiered"), at a size where nothing else differs: what a read of the tail costs only
because nodes are on disk (replies held back, the disk nodes a read needs read first).

  .venv/bin/python bench/tier_tail.py [--module target/dist/libxstream.so] [--n 20000]
                                      [--reps 5] [--calls 20000]

Two servers of one run: `u` untiered, `t` with `xstream.tier-dir` set and `tier-memory 0`
(every sealed node on disk). Each gets --n entries of ~200 bytes in `s`; then, --reps times,
interleaved, --calls pipelined `XS.REVRANGE s + - COUNT 10` (the tail node only: no node is read
from disk) and the server time per call from INFO commandstats. Prints each rep and the ratio
of the medians.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xbench  # noqa: E402
from xbench import Redis, Server  # noqa: E402


def usec_per_call(c: Redis, cmd: str) -> float:
    f = c.info("commandstats").get(f"cmdstat_{cmd}", "")
    kv = dict(x.split("=") for x in f.split(",") if "=" in x)
    return int(kv["usec"]) / max(1, int(kv["calls"]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(xbench.ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20_000)
    a = ap.parse_args()
    arms = []
    try:
        for tiered in (False, True):
            s = Server(os.path.abspath(a.module))
            s.start()
            c = Redis(s.port)
            if tiered:
                c.call("CONFIG", "SET", "xstream.tier-dir", os.path.join(s.dir, "tier"), "xstream.tier-memory", "0")
            c.send(b"".join(xbench.enc("XS.ADD", "s", f"{i}-1", "event", "x" * 180) for i in range(1, a.n + 1)))
            for _ in range(a.n):
                c.read_reply()
            arms.append(("tiered" if tiered else "untiered", s, c))
        time.sleep(2)  # the tiering step moves every sealed node
        res: dict[str, list[float]] = {name: [] for name, _, _ in arms}
        req = xbench.enc("XS.REVRANGE", "s", "+", "-", "COUNT", "10")
        for _ in range(a.reps):
            for name, _, c in arms:
                c.call("CONFIG", "RESETSTAT")
                left = a.calls
                while left > 0:
                    k = min(2000, left)
                    c.send(req * k)
                    for _ in range(k):
                        c.read_reply()
                    left -= k
                res[name].append(usec_per_call(c, "xs.revrange"))
        for name, _, c in arms:
            i = c.info("xstream")
            print(f"{name:9} {' '.join(f'{x:.2f}' for x in res[name])} us/call; nodes on disk {i.get('xstream_tier_disk_nodes')}, cold reads {i.get('xstream_tier_cold_reads')}")
        m = {k: statistics.median(v) for k, v in res.items()}
        print(f"median tiered / untiered: {m['tiered'] / m['untiered']:.3f}")
    finally:
        for _, s, _ in arms:
            s.stop()


if __name__ == "__main__":
    main()
