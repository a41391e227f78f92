#!/usr/bin/env python3
"""The decoded-node cache (`xstream.compression-cache`, issue 29): compressed reads against the
same stream uncompressed, with the cache off and at a given size, on one server.

  python3 bench/compression_cache.py [--module target/dist/libxstream.so] [--n 200000] [--reps 7] [--cache 1048576]

Fills --n JSON events (bench/compression.py's) into three module streams: compression off, lz4
and zstd. Then, interleaved over --reps (the order rotates), for the arms off, lz4 / zstd with
the cache at 0 and at --cache bytes: server time per call (INFO commandstats) of
  - XS.RANGE <random existing ID> + COUNT 100 (5,000 calls, fixed seed), and
  - XS.RANGE <id> + COUNT 10 over 100,000 consecutive entries in order (10,000 calls; each rep a
    new region), a consumer catching up;
and prints each arm's median and its ratio to the uncompressed stream, with the cache hits of the
in-order walk. The machine is shared: read the medians, and repeat. The figures of
docs/compression.md ("The decoded-node cache") come from this script.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compression as cm  # noqa: E402
import xbench  # noqa: E402
from xbench import Redis, Server, enc  # noqa: E402


def info(c: Redis) -> dict:
    return c.info("xstream")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(xbench.ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--cache", default="1048576", help="the cache size of the cached arms (bytes)")
    a = ap.parse_args()
    srv = Server(a.module)
    srv.start()
    c = Redis(srv.port)
    try:
        for comp in ("off", "lz4", "zstd"):
            c.call("CONFIG", "SET", "xstream.compression", comp)
            cm.fill(srv.port, "XS.ADD", f"s:{comp}", a.n)
        cm.used(c)  # waits for the background step
        c.call("CONFIG", "SET", "xstream.compression", "off")
        arms = [("off", "0"), ("lz4", "0"), ("lz4", a.cache), ("zstd", "0"), ("zstd", a.cache)]
        rng = random.Random(7)
        starts = [rng.randrange(1, a.n) for _ in range(5_000)]
        res = {arm: {"rand": [], "walk": []} for arm in arms}
        hits = {arm: 0 for arm in arms}
        conn = Redis(srv.port)
        walk_len = min(10_000, a.n // 20)
        for r in range(a.reps):
            k = r % len(arms)
            for arm in arms[k:] + arms[:k]:
                comp, cache = arm
                key = f"s:{comp}"
                c.call("CONFIG", "SET", "xstream.compression-cache", cache)
                c.call("CONFIG", "RESETSTAT")
                for lo in range(0, len(starts), 100):
                    conn.send(b"".join(enc("XS.RANGE", key, b"%d" % s, b"+", b"COUNT", b"100") for s in starts[lo:lo + 100]))
                    for _ in starts[lo:lo + 100]:
                        conn.read_reply()
                res[arm]["rand"].append(cm.usec_per_call(c, "xs.range"))
                h0 = int(info(c)["xstream_compression_cache_hits"])
                c.call("CONFIG", "RESETSTAT")
                first = 1 + (r * walk_len * 10) % max(1, a.n - walk_len * 10)
                seq = [first + 10 * j for j in range(walk_len)]
                for lo in range(0, len(seq), 100):
                    conn.send(b"".join(enc("XS.RANGE", key, b"%d" % s, b"+", b"COUNT", b"10") for s in seq[lo:lo + 100]))
                    for _ in seq[lo:lo + 100]:
                        conn.read_reply()
                res[arm]["walk"].append(cm.usec_per_call(c, "xs.range"))
                hits[arm] += int(info(c)["xstream_compression_cache_hits"]) - h0
        conn.close()
        for what, title in (("rand", "XS.RANGE <random id> + COUNT 100"), ("walk", "XS.RANGE COUNT 10 in order")):
            off = statistics.median(res[("off", "0")][what])
            print(f"{title}: uncompressed {off:.2f} us/call  (reps {['%.1f' % x for x in res[('off', '0')][what]]})")
            for arm in arms[1:]:
                v = statistics.median(res[arm][what])
                extra = f"  cache hits in the walks {hits[arm]}" if what == "walk" else ""
                print(f"  {arm[0]:4s} cache {arm[1]:>9s}: {v:7.2f} us/call  ratio {v / off:.2f}  "
                      f"(reps {['%.1f' % x for x in res[arm][what]]}){extra}")
    finally:
        c.close()
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
