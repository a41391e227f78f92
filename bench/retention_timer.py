#!/usr/bin/env python3
"""Retention timer CPU (issue 17): a server holding N streams with a MAXAGE and nothing to trim,
idle for S seconds, against the same server holding N streams without MAXAGE. Reads INFO cpu
(used_cpu_user + used_cpu_sys of the server process) before and after the idle window.

    bench/retention_timer.py [--streams 100000] [--seconds 20] [--module target/release/libxstream.so]

Also a second variant where every stream's oldest entry ages out once during the window
(MAXAGE shorter than the window): the timer's cost when it has real work, per stream trimmed.
"""

import argparse
import os
import time

from serverlib import redis_server


def cpu(r):
    i = r.info("cpu")
    return float(i["used_cpu_user"]) + float(i["used_cpu_sys"])


def run(server, module, n, seconds, maxage):
    with redis_server(server, module, prefix="xstream-rt-") as (r, _proc, _dir):
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            pipe.execute_command("XS.ADD", f"s{i}", "*", "f", "v")
            if maxage:
                pipe.execute_command("XS.CFGSET", f"s{i}", "MAXAGE", str(maxage))
            if len(pipe) >= 2000:
                pipe.execute()
        pipe.execute()
        time.sleep(1.0)
        c0, t0 = cpu(r), time.time()
        time.sleep(seconds)
        c1, t1 = cpu(r), time.time()
        left = sum(1 for i in range(0, n, max(1, n // 1000)) if r.execute_command("XS.LEN", f"s{i}") > 0)
        return (c1 - c0) / (t1 - t0), left


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--module", default=os.path.join(os.path.dirname(__file__), "..", "target/release/libxstream.so"))
    ap.add_argument("--streams", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    module = os.path.abspath(a.module)
    for label, maxage in [("no MAXAGE", 0), ("MAXAGE 1 h (nothing to trim)", 3_600_000),
                          (f"MAXAGE {int(a.seconds * 500)} ms (each stream trimmed once)", int(a.seconds * 500))]:
        frac, left = run(a.server, module, a.streams, a.seconds, maxage)
        print(f"{label:<45} {a.streams} streams: {100 * frac:.3f}% of a core over {a.seconds:.0f} s "
              f"(sampled streams still holding entries: {left} of {len(range(0, a.streams, max(1, a.streams // 1000)))})")


if __name__ == "__main__":
    main()
