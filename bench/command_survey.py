#!/usr/bin/env python3
"""Stream commands that no row of xbench.py or crosscheck.py covers, the module against the
built-in on one server: server time per call from INFO commandstats, module / built-in (lower is
better), the median of the reps' own ratios and the reps.

    .venv/bin/python bench/command_survey.py [--module target/dist/libxstream.so] [--reps 7]

The data, the same on both sides (keys b and m): 100,000 entries of two fields, groups g1 and g2,
20 consumers of g1 with 1,000 pending entries each. Each rep runs every command 2,000 times,
pipelined, the built-in first in even reps and the module first in odd ones. A command that
writes leaves both sides in the same state (the claims take the same IDs to the same consumer).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serverlib import redis_server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRIES = 100_000
CALLS = 2000


def commands(p: str, k: str) -> dict[str, list[str]]:
    return {
        "XINFO STREAM": [p + "INFO", "STREAM", k],
        "XINFO STREAM FULL COUNT 10": [p + "INFO", "STREAM", k, "FULL", "COUNT", "10"],
        "XINFO GROUPS": [p + "INFO", "GROUPS", k],
        "XINFO CONSUMERS": [p + "INFO", "CONSUMERS", k, "g1"],
        "XLEN": [p + "LEN", k],
        "XREAD COUNT 10 from the middle": [p + "READ", "COUNT", "10", "STREAMS", k, f"{ENTRIES // 2}-0"],
        "XREAD with nothing new": [p + "READ", "COUNT", "10", "STREAMS", k, f"{ENTRIES}-0"],
        "XREADGROUP 0 COUNT 10 (history)": [p + "READGROUP", "GROUP", "g1", "c3", "COUNT", "10", "STREAMS", k, "0"],
        "XPENDING IDLE 0 - + 10 consumer": [p + "PENDING", k, "g1", "IDLE", "0", "-", "+", "10", "c3"],
        "XCLAIM of 1 ID, JUSTID": [p + "CLAIM", k, "g1", "c5", "0", "3001-0", "JUSTID"],
        "XCLAIM of 10 IDs": [p + "CLAIM", k, "g1", "c5", "0"] + [f"{3001 + i}-0" for i in range(10)],
        "XREVRANGE + - COUNT 1": [p + "REVRANGE", k, "+", "-", "COUNT", "1"],
        "XRANGE - + COUNT 1": [p + "RANGE", k, "-", "+", "COUNT", "1"],
        "XGROUP CREATECONSUMER (exists)": [p + "GROUP", "CREATECONSUMER", k, "g2", "cx"],
        "XSETID to the current ID": [p + "SETID", k, f"{ENTRIES}-0"],
    }


ARMS = (("X", "b"), ("XS.", "m"))


def fill(r) -> None:
    for p, k in ARMS:
        pipe = r.pipeline(transaction=False)
        for i in range(ENTRIES):
            pipe.execute_command(p + "ADD", k, f"{i + 1}-0", "f", str(i), "g", "x" * 20)
            if len(pipe) >= 5000:
                pipe.execute()
        pipe.execute()
        r.execute_command(p + "GROUP", "CREATE", k, "g1", "0")
        r.execute_command(p + "GROUP", "CREATE", k, "g2", "0")
        for c in range(20):
            r.execute_command(p + "READGROUP", "GROUP", "g1", f"c{c}", "COUNT", "1000", "STREAMS", k, ">")


def usec_per_call(r, stats, cmd: list[str]) -> float:
    stats.config_resetstat()
    pipe = r.pipeline(transaction=False)
    for _ in range(CALLS):
        pipe.execute_command(*cmd)
    pipe.execute()
    # The one command that ran CALLS times (a subcommand is counted under its own name).
    for name, v in stats.info("commandstats").items():
        if name.startswith("cmdstat_") and v["calls"] >= CALLS:
            return float(v["usec_per_call"])
    raise RuntimeError(f"no commandstats entry for {cmd[0]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default=os.path.join(ROOT, "target/dist/libxstream.so"))
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    import redis

    with redis_server(a.server, a.module, prefix="xs-survey-") as (stats, _, _):
        port = stats.connection_pool.connection_kwargs["port"]
        r = redis.Redis(port=port)
        r.response_callbacks.clear()  # raw replies: redis-py's parsers do not know every form
        fill(r)
        names = list(commands("X", "b"))
        got: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for rep in range(a.reps):
            for n in names:
                t = {}
                for p, k in ARMS if rep % 2 == 0 else ARMS[::-1]:
                    t[p] = usec_per_call(r, stats, commands(p, k)[n])
                got[n].append((t["X"], t["XS."]))
        print(f"{'command':<34} {'module/built-in':>15}  {'µs built-in':>11} {'µs module':>9}  reps")
        for n in names:
            ratios = [m / b for b, m in got[n] if b > 0]
            b = statistics.median(x[0] for x in got[n])
            m = statistics.median(x[1] for x in got[n])
            print(f"{n:<34} {statistics.median(ratios):>15.2f}  {b:>11.2f} {m:>9.2f}  " + " ".join(f"{x:.2f}" for x in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
