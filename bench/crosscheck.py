#!/usr/bin/env python3
"""A second harness for issue 29's table, written apart from bench/xbench.py and sharing no code
with it: the workloads are driven by redis-benchmark (the tool users compare with) and redis-py,
and timed the way the issue's own figures were: one server, the built-in and the module side by
side, interleaved, server time per call from INFO commandstats, module / built-in (lower is
better; the issue's direction, the reverse of docs/BENCHMARKS.md's speed ratios).

    .venv/bin/python bench/crosscheck.py [--module target/dist/libxstream.so] [--reps 5] [--only xadd,ack]

Each rep runs three arms in a rotating order: the built-in (`X...` on key b), the module
(`XS....` on key m) and the built-in again (key a): the two built-in arms give the A/A ratio,
what the run's noise alone makes of two identical arms. A row's figure is the median over reps
of module / built-in, next to the median A/A. `make bench-crosscheck` runs it.

Rows (the issue's table):
  xadd-p1, xadd-p16, xadd-64b, xadd-5f, xadd-maxlen   redis-benchmark, 1 client (P1) or 4 (P16)
  ack-1c, ack-4c         XREADGROUP COUNT 10 + XACK of the 10 (1 or 4 consumers, lock-step),
                         server time of the pair
  xpending-summary       XPENDING key group on 100,000 pending entries
  xtrim-half            XTRIM MAXLEN = 100000 of a fresh 200,000-entry stream
  mem-pending            used_memory per pending entry, 100,000 in one group (bytes, not time)
  save                   SAVE of a 5,000,000-entry stream alone in the server
  xrange, xrevrange, xpending-range, xautoclaim, xdel, xtrim-minid   the reads and deletes
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import redis_server  # noqa: E402 (server start-up only; nothing of xbench)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Arms: (name, command prefix, key). "a" is the built-in's second arm (A/A).
ARMS = [("builtin", "X", "b"), ("module", "XS.", "m"), ("builtin2", "X", "a")]


class Host:
    """One redis-server with the module loaded (a private copy of it: a build may overwrite the
    original), on a free port (bench/serverlib.py)."""

    def __init__(self, module: str, server: str):
        self.stack = contextlib.ExitStack()
        tmp = tempfile.mkdtemp(prefix="xs-crosscheck-")
        self.stack.callback(shutil.rmtree, tmp, True)
        so = os.path.join(tmp, "libxstream.so")
        shutil.copyfile(module, so)
        os.chmod(so, 0o755)
        self.r, self.proc, _ = self.stack.enter_context(redis_server(server, so, prefix="xs-crosscheck-"))
        self.port = self.r.connection_pool.connection_kwargs["port"]
        # The workloads' client: replies as the server sent them (redis-py's parsers would read a
        # built-in XPENDING range as a summary, and treat X* and XS.* replies differently).
        self.raw = redis.Redis(port=self.port)
        self.raw.response_callbacks = {}

    def stop(self) -> None:
        self.stack.close()

    def usec(self, *cmds: str) -> tuple[float, int]:
        """Total server time (µs) and calls of `cmds` since the last CONFIG RESETSTAT."""
        st = self.r.info("commandstats")
        us, calls = 0.0, 0
        for c in cmds:
            s = st.get("cmdstat_" + c.lower())
            if s:
                us += float(s["usec"])
                calls += int(s["calls"])
        return us, calls

    def bench(self, *args: str, n: int, clients: int = 1, pipeline: int = 1) -> None:
        subprocess.run(["redis-benchmark", "-p", str(self.port), "-n", str(n), "-c", str(clients),
                        "-P", str(pipeline), "-q", *args], check=True, capture_output=True)


def fill(h: Host, pre: str, key: str, n: int) -> None:
    """n entries `f <i>` with IDs 1-1 .. n-1 (redis-py, pipelined)."""
    p = h.raw.pipeline(transaction=False)
    for i in range(1, n + 1):
        p.execute_command(pre + "ADD", key, f"{i}-1", "f", str(i))
        if i % 10_000 == 0:
            p.execute()
    p.execute()


def per_call(h: Host, cmd: str) -> float:
    us, calls = h.usec(cmd)
    return us / calls


# --- rows: each runs one arm on a fresh key and returns its figure (µs per op, or bytes) ---

def xadd_row(args: list[str], n: int, clients: int, pipeline: int):
    def run(h: Host, pre: str, key: str) -> float:
        h.r.delete(key)
        h.r.execute_command("CONFIG", "RESETSTAT")
        h.bench(pre + "ADD", key, *args, n=n, clients=clients, pipeline=pipeline)
        return per_call(h, pre + "ADD")
    return run


def ack_row(consumers: int, rounds: int = 5_000):
    def run(h: Host, pre: str, key: str) -> float:
        h.r.delete(key)
        fill(h, pre, key, rounds * 10)
        h.r.execute_command(pre + "GROUP", "CREATE", key, "g", "0")
        conns = [redis.Redis(port=h.port) for _ in range(consumers)]
        for c in conns:
            c.response_callbacks = {}
        h.r.execute_command("CONFIG", "RESETSTAT")
        for i in range(rounds):
            c = conns[i % consumers]
            rep = c.execute_command(pre + "READGROUP", "GROUP", "g", f"c{i % consumers}", "COUNT", 10,
                                    "STREAMS", key, ">")
            ids = [e[0] for e in rep[0][1]]
            if len(ids) != 10:
                raise RuntimeError(f"XREADGROUP read {len(ids)} entries, not 10")
            if c.execute_command(pre + "ACK", key, "g", *ids) != len(ids):
                raise RuntimeError("XACK acknowledged fewer IDs than read")
        for c in conns:
            c.close()
        us, _ = h.usec(pre + "READGROUP", pre + "ACK")
        return us / rounds
    return run


def pending(h: Host, pre: str, key: str, n: int) -> None:
    """n entries, all delivered to consumer c of group g."""
    h.r.delete(key)
    fill(h, pre, key, n)
    h.r.execute_command(pre + "GROUP", "CREATE", key, "g", "0")
    for _ in range(0, n, 10_000):
        h.raw.execute_command(pre + "READGROUP", "GROUP", "g", "c", "COUNT", 10_000, "STREAMS", key, ">")


def repeated(h: Host, pre: str, cmd: str, calls) -> float:
    """Runs the argument lists of `calls` lock-step and returns the server time per call."""
    h.r.execute_command("CONFIG", "RESETSTAT")
    p = h.raw.pipeline(transaction=False)
    for args in calls:
        p.execute_command(pre + cmd, *args)
        if len(p) == 100:
            p.execute()
    p.execute()
    return per_call(h, pre + cmd)


def xpending_summary(h: Host, pre: str, key: str) -> float:
    pending(h, pre, key, 100_000)
    return repeated(h, pre, "PENDING", [(key, "g")] * 2_000)


def xtrim_half(h: Host, pre: str, key: str) -> float:
    h.r.delete(key)
    fill(h, pre, key, 200_000)
    h.r.execute_command("CONFIG", "RESETSTAT")
    if h.r.execute_command(pre + "TRIM", key, "MAXLEN", "=", 100_000) != 100_000:
        raise RuntimeError("XTRIM removed another count")
    return per_call(h, pre + "TRIM")


def mem_pending(h: Host, pre: str, key: str) -> float:
    h.r.delete(key)
    fill(h, pre, key, 100_000)
    h.r.execute_command(pre + "GROUP", "CREATE", key, "g", "0")
    time.sleep(0.1)
    before = int(h.r.info("memory")["used_memory"])
    for _ in range(10):
        h.raw.execute_command(pre + "READGROUP", "GROUP", "g", "c", "COUNT", 10_000, "STREAMS", key, ">")
    time.sleep(0.1)
    after = int(h.r.info("memory")["used_memory"])
    h.r.delete(key)
    return (after - before) / 100_000


def save(h: Host, pre: str, key: str) -> float:
    h.r.flushall()
    h.bench("-r", "100000000", pre + "ADD", key, "*", "f", "__rand_int__", n=5_000_000, pipeline=64)
    if h.r.execute_command(pre + "LEN", key) != 5_000_000:
        raise RuntimeError("the stream is not 5,000,000 entries long")
    h.r.execute_command("CONFIG", "RESETSTAT")
    h.r.save()
    us, _ = h.usec("save")
    h.r.flushall()
    return us


READ_N = 200_000
_rng = random.Random(29)
STARTS = [_rng.randrange(1, READ_N) for _ in range(2_000)]


def reads(shape):
    """A read or delete at 2,000 random places of a 200,000-entry stream (100,000 pending)."""
    def run(h: Host, pre: str, key: str) -> float:
        pending(h, pre, key, READ_N)
        h.r.execute_command("XS.GROUP" if pre == "XS." else "XGROUP", "CREATECONSUMER", key, "g", "d")
        cmd, calls = shape(key)
        return repeated(h, pre, cmd, calls)
    return run


ROWS = {
    "xadd-p1": xadd_row(["*", "f", "v"], 50_000, 1, 1),
    "xadd-p16": xadd_row(["*", "f", "v"], 400_000, 4, 16),
    "xadd-64b": xadd_row(["*", "f", "x" * 64], 400_000, 4, 16),
    "xadd-5f": xadd_row(["*", "f1", "v1", "f2", "v2", "f3", "v3", "f4", "v4", "f5", "v5"], 400_000, 4, 16),
    "xadd-maxlen": xadd_row(["MAXLEN", "~", "1000", "*", "f", "v"], 400_000, 4, 16),
    "ack-1c": ack_row(1),
    "ack-4c": ack_row(4),
    "xpending-summary": xpending_summary,
    "xtrim-half": xtrim_half,
    "mem-pending": mem_pending,
    "save": save,
    "xrange": reads(lambda k: ("RANGE", [(k, f"{s}-1", "+", "COUNT", 100) for s in STARTS])),
    "xrevrange": reads(lambda k: ("REVRANGE", [(k, f"{s}-1", "-", "COUNT", 100) for s in STARTS])),
    "xpending-range": reads(lambda k: ("PENDING", [(k, "g", f"{s}-1", "+", 100) for s in STARTS])),
    "xautoclaim": reads(lambda k: ("AUTOCLAIM", [(k, "g", "d", 0, f"{s}-1", "COUNT", 100) for s in STARTS])),
    "xdel": reads(lambda k: ("DEL", [(k, f"{s}-1") for s in STARTS])),
    "xtrim-minid": reads(lambda k: ("TRIM", [(k, "MINID", f"{s}-1") for s in sorted(STARTS)])),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default=os.path.join(ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--server", default=os.environ.get("XSTREAM_REDIS_SERVER", "redis-server"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated rows (default: all)")
    a = ap.parse_args()
    rows = [r for r in a.only.split(",") if r] or list(ROWS)
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; rows: {', '.join(ROWS)}")
    h = Host(a.module, a.server)
    print(f"redis-server {h.r.info('server')['redis_version']}, module {a.module}, {a.reps} reps")
    print(f"{'row':18} {'module':>10} {'built-in':>10} {'module/built-in':>16} {'A/A':>6}   per rep")
    try:
        for row in rows:
            res: dict[str, list[float]] = {arm: [] for arm, _, _ in ARMS}
            for rep in range(a.reps):
                order = ARMS[rep % 3:] + ARMS[:rep % 3]
                for arm, pre, key in order:
                    res[arm].append(ROWS[row](h, pre, key))
                    h.r.delete(key)
            ratios = [m / b for m, b in zip(res["module"], res["builtin"])]
            aa = [x / b for x, b in zip(res["builtin2"], res["builtin"])]
            unit = "B" if row == "mem-pending" else "us"
            print(f"{row:18} {statistics.median(res['module']):8.2f}{unit} {statistics.median(res['builtin']):8.2f}{unit}"
                  f" {statistics.median(ratios):16.3f} {statistics.median(aa):6.3f}   {' '.join(f'{x:.2f}' for x in ratios)}",
                  flush=True)
    finally:
        h.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
