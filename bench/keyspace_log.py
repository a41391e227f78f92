#!/usr/bin/env python3
"""The keyspace log's cost on writes (issue 33): `redis-benchmark -t set -P 16` against servers with
the module loaded, in four states, interleaved over --reps rounds (the order rotates):

  off        the log never set on this server (nothing subscribed: the module's baseline)
  nomatch    `xstream.keyspace-log klog`, pattern `nomatch:*` (every SET seen, none logged)
  all        `xstream.keyspace-log klog`, pattern `*` (every SET logged: an append + its propagation)
  off-after  the log set, then switched off again (the subscription stays: a module cannot
             unsubscribe; each notification is looked at and dropped)

Each state has its own server (started fresh, same binary and module): per round, for each
state, CONFIG RESETSTAT, one redis-benchmark run, then the server's time per SET
(INFO commandstats usec_per_call, which includes the post-notification job: it runs inside the
command's call()) and the client's requests per second. Printed: medians and the ratios to `off`.

  python3 bench/keyspace_log.py --server /path/to/redis-server --module target/dist/libxstream.so \
      [--n 1000000] [--reps 5] [--pipeline 16] [--keyspace 100000]

Needs a server with post-notification jobs (Redis 7.2+ or Valkey).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

STATES = ["off", "nomatch", "all", "off-after"]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cli(port: int, *args: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True).stdout.strip()


class Srv:
    def __init__(self, server: str, module: str, state: str):
        self.dir = tempfile.mkdtemp(prefix="klbench-")
        so = os.path.join(self.dir, "x.so")
        shutil.copyfile(module, so)
        os.chmod(so, 0o755)
        self.port = free_port()
        self.proc = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "log"), "--loadmodule", so],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                if cli(self.port, "PING") == "PONG":
                    break
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.05)
        if state in ("nomatch", "all", "off-after"):
            pattern = "nomatch:*" if state == "nomatch" else "*"
            out = cli(self.port, "CONFIG", "SET", "xstream.keyspace-log", "klog", "xstream.keyspace-log-pattern", pattern)
            assert out == "OK", out
        if state == "off-after":
            assert cli(self.port, "CONFIG", "SET", "xstream.keyspace-log", "") == "OK"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)
        shutil.rmtree(self.dir, ignore_errors=True)


def run(srv: Srv, n: int, pipeline: int, keyspace: int) -> tuple[float, float]:
    cli(srv.port, "CONFIG", "RESETSTAT")
    out = subprocess.run(
        ["redis-benchmark", "-p", str(srv.port), "-t", "set", "-n", str(n), "-P", str(pipeline), "-r", str(keyspace), "-q"],
        capture_output=True, text=True, check=True).stdout
    rps = float(re.findall(r"([0-9.]+) requests per second", out)[-1])
    stats = cli(srv.port, "INFO", "commandstats")
    usec = float(re.search(r"cmdstat_set:calls=\d+,usec=\d+,usec_per_call=([0-9.]+)", stats).group(1))
    return usec, rps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--module", default="target/dist/libxstream.so")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--keyspace", type=int, default=100_000)
    a = ap.parse_args()
    version = subprocess.run([a.server, "--version"], capture_output=True, text=True).stdout.strip()
    servers = {s: Srv(a.server, os.path.abspath(a.module), s) for s in STATES}
    usec = {s: [] for s in STATES}
    rps = {s: [] for s in STATES}
    try:
        for r in range(a.reps):
            order = STATES[r % len(STATES):] + STATES[:r % len(STATES)]
            for s in order:
                u, q = run(servers[s], a.n, a.pipeline, a.keyspace)
                usec[s].append(u)
                rps[s].append(q)
            print(f"round {r + 1}: " + ", ".join(f"{s} {usec[s][-1]:.3f} us {rps[s][-1]:.0f}/s" for s in STATES), flush=True)
        logged = cli(servers["all"].port, "XS.LEN", "klog")
    finally:
        for s in servers.values():
            s.stop()
    print(f"\n{version}\nredis-benchmark -t set -n {a.n} -P {a.pipeline} -r {a.keyspace}, {a.reps} rounds; "
          f"the `all` log held {logged} entries (maxlen 1,000,000)")
    base_u, base_q = statistics.median(usec["off"]), statistics.median(rps["off"])
    print(f"{'state':<10} {'usec/SET':>9} {'ratio':>6} {'SET/s':>10} {'ratio':>6}")
    for s in STATES:
        mu, mq = statistics.median(usec[s]), statistics.median(rps[s])
        print(f"{s:<10} {mu:>9.3f} {mu / base_u:>6.2f} {mq:>10.0f} {base_q / mq:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
