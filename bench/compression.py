#!/usr/bin/env python3
"""Compression of sealed nodes (issue 18): memory and costs, on one server.

  python3 bench/compression.py [--module target/release/libxstream.so] [--n 1000000] [--reps 3] [--codecs lz4,zstd]

1. Memory: N JSON-like event entries (150-300 bytes, fixed seed 18, realistic variety:
   user, action, ts, props{page, ref, device, ms, tags}) into a built-in stream (XADD), a module
   stream with `xstream.compression off` and one per codec (lz4, zstd): used_memory deltas (once the
   background step compressed every sealed node) and ratios to the built-in. Deterministic.
2. Costs, module with compression off vs each codec, interleaved over --reps (the order rotates):
   server time per call (INFO commandstats usec_per_call) of
   - XS.ADD of 100,000 more entries (pipelined, 100 per batch),
   - XS.RANGE key <random existing ID> + COUNT 100 (20,000 calls, fixed seed),
   - RDB: SAVE and load (DEBUG RELOAD NOSAVE) of each N-entry stream alone, against the built-in's,
     also with sanitize-dump-payload yes (default rdbcompression yes: LZF on every saved string).
   The machine is shared: read the medians, and repeat.

Reuses bench/xbench.py's server and RESP client.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xbench  # noqa: E402
from xbench import Redis, Server, enc  # noqa: E402

ACTIONS = ["click", "view", "purchase", "login", "logout", "add_to_cart", "search", "share"]
PAGES = ["/home", "/product/42", "/product/7731", "/cart", "/search?q=shoes", "/account/settings",
         "/checkout", "/blog/how-to-pick-running-shoes"]
COUNTRIES = ["FR", "DE", "US", "GB", "JP", "BR", "IN", "ES", "IT", "NL"]


def event(rng: random.Random, i: int) -> bytes:
    tags = "".join(f',"tag{k}":"t{rng.randrange(50)}"' for k in range(rng.randrange(4)))
    s = ('{"user":"user-%d","action":"%s","ts":%d,"props":{"page":"%s","ref":"campaign-%d",'
         '"device":"%s","country":"%s","ms":%d,"session":"%016x"%s}}') % (
        rng.randrange(50_000), rng.choice(ACTIONS), 1_700_000_000_000 + i * 37 + rng.randrange(30),
        rng.choice(PAGES), rng.randrange(40), "mobile" if rng.random() < 0.6 else "desktop",
        rng.choice(COUNTRIES), rng.randrange(5000), rng.getrandbits(64), tags)
    return s.encode()


def fill(port: int, cmd: str, key: str, n: int, start: int = 0, seed: int = 18) -> None:
    rng = random.Random(seed * 1_000_003 + start)
    c = Redis(port)
    try:
        batch = 2000
        for lo in range(start, start + n, batch):
            hi = min(lo + batch, start + n)
            c.send(b"".join(enc(cmd, key, b"%d-0" % (i + 1), b"event", event(rng, i)) for i in range(lo, hi)))
            for _ in range(hi - lo):
                r = c.read_reply()
                if isinstance(r, Exception):
                    raise r
    finally:
        c.close()


def used(c: Redis) -> int:
    time.sleep(0.05)
    # Sealed nodes are compressed by a background step: wait until nothing is queued.
    for _ in range(600):
        q = c.info("xstream").get("xstream_compression_queued_keys")
        if q is None or int(q) == 0:
            break
        time.sleep(0.05)
    return int(c.info("memory")["used_memory"])


def usec_per_call(c: Redis, name: str) -> float:
    st = c.info("commandstats").get(f"cmdstat_{name}")
    if not st:
        return float("nan")
    kv = dict(x.split("=") for x in st.split(","))
    return float(kv["usec"]) / float(kv["calls"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(xbench.ROOT, "target", "release", "libxstream.so"))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--codecs", default="lz4,zstd", help="codecs to measure, comma-separated")
    a = ap.parse_args()
    srv = Server(a.module)
    srv.start()
    c = Redis(srv.port)
    try:
        sizes = []
        rng = random.Random(18)
        for i in range(2000):
            sizes.append(len(event(rng, i)))
        print(f"event sizes: min {min(sizes)} median {statistics.median(sizes)} max {max(sizes)} bytes")
        mem = {}
        codecs = [x for x in a.codecs.split(",") if x]
        arms = [("builtin", "XADD", None), ("module-off", "XS.ADD", "off")] + [(f"module-{k}", "XS.ADD", k) for k in codecs]
        for arm, cmd, comp in arms:
            if comp:
                c.call("CONFIG", "SET", "xstream.compression", comp)
            before = used(c)
            t0 = time.perf_counter()
            fill(srv.port, cmd, f"mem:{arm}", a.n)
            mem[arm] = used(c) - before
            print(f"{arm:12s} {mem[arm]:>13,} B  {mem[arm] / a.n:7.1f} B/entry  fill {time.perf_counter() - t0:5.1f} s")
        for arm, _, comp in arms[1:]:
            print(f"memory ratio {arm} / builtin: {mem[arm] / mem['builtin']:.3f}")

        def reload_time() -> float:
            t0 = time.perf_counter()
            c.call("DEBUG", "RELOAD")
            return time.perf_counter() - t0

        # Costs: XS.ADD and XS.RANGE COUNT 100, compression off vs each codec, interleaved
        # (the order rotates every rep).
        comps = ["off"] + codecs
        res = {k: {"add": [], "range": []} for k in comps}
        order = []
        for r in range(a.reps):
            order += comps[r % len(comps):] + comps[:r % len(comps)]
        rng = random.Random(7)
        starts = [rng.randrange(1, a.n) for _ in range(20_000)]
        for k, comp in enumerate(order):
            c.call("CONFIG", "SET", "xstream.compression", comp)
            key = f"mem:module-{comp}"
            c.call("CONFIG", "RESETSTAT")
            fill(srv.port, "XS.ADD", f"add:{comp}:{k}", 100_000, start=0, seed=99)
            res[comp]["add"].append(usec_per_call(c, "xs.add"))
            c.call("DEL", f"add:{comp}:{k}")
            c.call("CONFIG", "RESETSTAT")
            conn = Redis(srv.port)
            for lo in range(0, len(starts), 100):
                conn.send(b"".join(enc("XS.RANGE", key, b"%d" % s, b"+", b"COUNT", b"100") for s in starts[lo:lo + 100]))
                for _ in starts[lo:lo + 100]:
                    conn.read_reply()
            conn.close()
            res[comp]["range"].append(usec_per_call(c, "xs.range"))
        for what in ("add", "range"):
            off = statistics.median(res["off"][what])
            for k in codecs:
                v = statistics.median(res[k][what])
                print(f"{what:6s} usec/call  off {off:7.2f}  {k} {v:7.2f}  ratio {v / off:.3f}   "
                      f"(reps off {['%.2f' % x for x in res['off'][what]]} {k} {['%.2f' % x for x in res[k][what]]})")

        # RDB: each stream alone in the server (refilled), SAVE then DEBUG RELOAD NOSAVE (the load
        # alone), medians of --reps; also the load with sanitize-dump-payload yes. Encoding 6
        # saves compressed nodes as they are and loads them without recompressing.
        rdb = {}
        for arm, cmd, comp in [("builtin", "XADD", None)] + [(f"module-{k}", "XS.ADD", k) for k in codecs]:
            c.call("FLUSHALL")
            if comp:
                c.call("CONFIG", "SET", "xstream.compression", comp)
            fill(srv.port, cmd, "rdb", a.n)
            used(c)
            sv, ld, lds = [], [], []
            for _ in range(a.reps):
                t0 = time.perf_counter()
                c.call("SAVE")
                sv.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                c.call("DEBUG", "RELOAD", "NOSAVE")
                ld.append(time.perf_counter() - t0)
                c.call("CONFIG", "SET", "sanitize-dump-payload", "yes")
                t0 = time.perf_counter()
                c.call("DEBUG", "RELOAD", "NOSAVE")
                lds.append(time.perf_counter() - t0)
                c.call("CONFIG", "SET", "sanitize-dump-payload", "no")
            size = os.path.getsize(os.path.join(srv.dir, "dump.rdb"))
            rdb[arm] = (statistics.median(sv), statistics.median(ld), statistics.median(lds), size)
        b = rdb["builtin"]
        print(f"RDB builtin       save {b[0]:.3f} s  load {b[1]:.3f} s  load(sanitize yes) {b[2]:.3f} s  file {b[3]:,} B")
        for k in codecs:
            m = rdb[f"module-{k}"]
            print(f"RDB module-{k:5s}  save {m[0]:.3f} s  load {m[1]:.3f} s  load(sanitize yes) {m[2]:.3f} s  file {m[3]:,} B   "
                  f"ratios: load {m[1] / b[1]:.3f}  load(sanitize yes) {m[2] / b[2]:.3f}  save+load {(m[0] + m[1]) / (b[0] + b[1]):.3f}  file {m[3] / b[3]:.3f}")
    finally:
        c.close()
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
