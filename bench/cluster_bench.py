#!/usr/bin/env python3
"""Redis Cluster figures for issue 19, module vs built-in on the same cluster, side by side.

Starts tests/cluster.sh's cluster (3 primaries + 3 replicas, the module loaded, not in takeover
mode, so XADD is the built-in and XS.ADD the module), then measures:

1. Scaling: XADD vs XS.ADD throughput (redis-benchmark, pipelined) against one primary, then
   against the three primaries at once (one redis-benchmark per primary, keys hash-tagged to a
   slot it owns). Figures: 3-node / 1-node throughput per kind, and module / built-in at each.
   On a 2-core machine three primaries, three replicas and three benchmark clients share two
   cores: the scaling figure is bounded by the machine, what matters is that the module's
   scaling matches the built-in's.
2. Slot move time: a 100,000-entry stream with 2 groups and 8,100 pending entries, module and
   built-in in the same slot, each copied to another primary with MIGRATE ... COPY REPLACE while
   the slot is MIGRATING / IMPORTING (what `redis-cli --cluster reshard` sends; the module's key
   goes through its DUMP / RESTORE). Median of several moves; the ratio is module / built-in.

    bench/cluster_bench.py [--rounds 3] [--requests 200000] [--moves 5]
"""

import argparse
import os
import socket
import statistics
import subprocess
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def primaries(port):
    """(port, node id, first slot, last slot) of each primary, by first slot."""
    out = []
    for line in sh("redis-cli", "-p", str(port), "CLUSTER", "NODES").splitlines():
        f = line.split()
        if len(f) > 8 and "master" in f[2]:
            p = int(f[1].split(":")[1].split("@")[0])
            lo, hi = f[8].split("-") if "-" in f[8] else (f[8], f[8])
            out.append((p, f[0], int(lo), int(hi)))
    return sorted(out, key=lambda x: x[2])


def tag_for(r, lo, hi):
    for i in range(100000):
        t = f"t{i}"
        s = r.execute_command("CLUSTER", "KEYSLOT", "{" + t + "}")
        if lo <= s <= hi:
            return t
    raise RuntimeError("no tag")


def bench(port, cmd, key, n):
    out = sh("redis-benchmark", "-p", str(port), "-n", str(n), "-c", "50", "-P", "16", "-q", "--csv",
             cmd, key, "*", "f", "v")
    # "name","rps",...
    line = [l for l in out.splitlines() if l and not l.startswith('"test"')][-1]
    return float(line.split(",")[1].strip('"'))


def scaling(prims, rounds, n):
    r0 = redis.Redis(port=prims[0][0])
    tags = [tag_for(r0, lo, hi) for (_, _, lo, hi) in prims]
    res = {}
    for rnd in range(rounds):
        for cmd in (["XADD", "XS.ADD"] if rnd % 2 == 0 else ["XS.ADD", "XADD"]):
            one = bench(prims[0][0], cmd, "{%s}b%s" % (tags[0], cmd), n)
            procs = [subprocess.Popen(["redis-benchmark", "-p", str(p), "-n", str(n), "-c", "50", "-P", "16", "-q", "--csv",
                                       cmd, "{%s}b%s" % (t, cmd), "*", "f", "v"], stdout=subprocess.PIPE, text=True)
                     for (p, _, _, _), t in zip(prims, tags)]
            three = 0.0
            for pr in procs:
                out = pr.communicate()[0]
                line = [l for l in out.splitlines() if l and not l.startswith('"test"')][-1]
                three += float(line.split(",")[1].strip('"'))
            res.setdefault(cmd, []).append((one, three))
            for (p, _, _, _) in prims:
                redis.Redis(port=p).flushall()
    return res


def slot_moves(prims, moves, entries):
    src, dst = prims[0], prims[1]
    r = redis.Redis(port=src[0])
    tag = tag_for(r, src[2], src[3])
    slot = r.execute_command("CLUSTER", "KEYSLOT", "{" + tag + "}")
    keys = {"XS.": "{%s}m" % tag, "X": "{%s}n" % tag}
    for p, k in keys.items():
        r.execute_command(p + "GROUP", "CREATE", k, "g1", "$", "MKSTREAM")
        r.execute_command(p + "GROUP", "CREATE", k, "g2", "$")
        pipe = r.pipeline(transaction=False)
        for i in range(entries):
            pipe.execute_command(p + "ADD", k, f"{1_000_000 + i // 10}-{i % 10}", "f", str(i))
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        for g, c, n in (("g1", "a", 5000), ("g1", "b", 3000), ("g2", "c", 100)):
            r.execute_command(p + "READGROUP", "GROUP", g, c, "COUNT", n, "STREAMS", k, ">")
    rd = redis.Redis(port=dst[0])
    rd.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src[1])
    r.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst[1])
    times = {"XS.": [], "X": []}
    try:
        for i in range(moves):
            for p in (["X", "XS."] if i % 2 == 0 else ["XS.", "X"]):
                t0 = time.perf_counter()
                r.execute_command("MIGRATE", "127.0.0.1", dst[0], keys[p], 0, 60000, "COPY", "REPLACE")
                times[p].append(time.perf_counter() - t0)
    finally:
        r.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
        rd.execute_command("CLUSTER", "SETSLOT", slot, "STABLE")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--moves", type=int, default=5)
    ap.add_argument("--entries", type=int, default=1_000_000)
    a = ap.parse_args()
    env = dict(os.environ, CLUSTER_DIR=os.path.join(ROOT, "target", "cluster-bench"), CLUSTER_PORT="23001")
    subprocess.run([os.path.join(ROOT, "tests", "cluster.sh"), "stop"], env=env, capture_output=True)
    print(subprocess.run([os.path.join(ROOT, "tests", "cluster.sh"), "start"], env=env, capture_output=True, text=True).stdout.strip())
    try:
        ports = open(os.path.join(env["CLUSTER_DIR"], "ports")).read().split()
        prims = primaries(int(ports[0]))
        res = scaling(prims, a.rounds, a.requests)
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in res.items()}
        for k, (one, three) in med.items():
            print(f"{k:7} 1 node {one:>10.0f} req/s   3 nodes {three:>10.0f} req/s   3/1 {three / one:.2f}")
        print(f"module / built-in: 1 node {med['XS.ADD'][0] / med['XADD'][0]:.2f}, 3 nodes {med['XS.ADD'][1] / med['XADD'][1]:.2f}; "
              f"scaling module / built-in {(med['XS.ADD'][1] / med['XS.ADD'][0]) / (med['XADD'][1] / med['XADD'][0]):.2f}")
        t = slot_moves(prims, a.moves, a.entries)
        m, b = statistics.median(t["XS."]), statistics.median(t["X"])
        print(f"slot move (MIGRATE COPY of a {a.entries}-entry stream, 2 groups, 8,100 pending): module {m * 1000:.0f} ms, "
              f"built-in {b * 1000:.0f} ms, ratio {m / b:.2f}, paired {statistics.median(x / y for x, y in zip(t['XS.'], t['X'])):.2f} "
              f"(median of each move's module / built-in; runs: module {[round(x * 1000) for x in t['XS.']]}, "
              f"built-in {[round(x * 1000) for x in t['X']]})")
    finally:
        subprocess.run([os.path.join(ROOT, "tests", "cluster.sh"), "stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
