#!/usr/bin/env python3
"""A small job queue on xstream: a producer, a pool of workers, and crash recovery.

    python3 jobqueue.py produce --jobs 1000          # add 1000 jobs to the stream `jobs`
    python3 jobqueue.py work --name w1               # one worker (run several)
    python3 jobqueue.py work --name w2 --crash-after 25
    python3 jobqueue.py status                       # stream, group, pending, results
    python3 jobqueue.py demo --jobs 1000 --workers 3 # all of it in one process tree, with a crash

Every worker reads with XREADGROUP (group `workers`), does the job (here: squares a number and
stores the result in the hash `results`), then acknowledges it with XACK. A worker that crashes
leaves the jobs it had taken pending; the others take them over with XAUTOCLAIM once they have
been idle for --claim-idle ms, so every job is done (at least once; `results` is written with
HSETNX, so a job done twice is counted in `duplicates` but stored once).

Commands go through the module's names (`XS.ADD`, ...) by default, which works with `make run`.
With the module in takeover mode (`loadmodule libxstream.so takeover yes`) pass `--names
standard`: the same code then uses XADD & co., which the module serves.
"""

import argparse
import os
import subprocess
import sys
import time

import redis

STREAM, GROUP, RESULTS = "jobs", "workers", "results"


class Streams:
    """The stream commands: redis-py's own stream API with `--names standard` (takeover mode), or
    the module's names through execute_command (replies normalized to what redis-py returns)."""

    def __init__(self, r, names):
        self.r = r
        self.std = names == "standard"

    def add(self, pipe, n):
        if self.std:
            pipe.xadd(STREAM, {"n": n})
        else:
            pipe.execute_command("XS.ADD", STREAM, "*", "n", n)

    def group_create(self):
        try:
            if self.std:
                self.r.xgroup_create(STREAM, GROUP, "0", mkstream=True)
            else:
                self.r.execute_command("XS.GROUP", "CREATE", STREAM, GROUP, "0", "MKSTREAM")
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise

    def read(self, consumer, count, block_ms):
        """[(id, fields-dict)] of new entries."""
        if self.std:
            reply = self.r.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=count, block=block_ms)
        else:
            reply = self.r.execute_command(
                "XS.READGROUP", "GROUP", GROUP, consumer, "COUNT", count, "BLOCK", block_ms, "STREAMS", STREAM, ">"
            )
        return read_entries(reply)

    def ack(self, *ids):
        if self.std:
            return self.r.xack(STREAM, GROUP, *ids)
        return self.r.execute_command("XS.ACK", STREAM, GROUP, *ids)

    def autoclaim(self, consumer, min_idle_ms, start, count):
        """(next-start, [(id, fields-dict)]) of claimed entries still in the stream."""
        if self.std:
            nxt, claimed = self.r.xautoclaim(STREAM, GROUP, consumer, min_idle_ms, start, count=count)[:2]
            return nxt, [(i, f) for i, f in claimed if f]
        nxt, claimed = self.r.execute_command("XS.AUTOCLAIM", STREAM, GROUP, consumer, min_idle_ms, start, "COUNT", count)[:2]
        return nxt, [(i, pairs(f)) for i, f in claimed if f is not None]

    def pending_count(self):
        if self.std:
            return self.r.xpending(STREAM, GROUP)["pending"]
        return self.r.execute_command("XS.PENDING", STREAM, GROUP)[0]

    def length(self):
        return self.r.xlen(STREAM) if self.std else self.r.execute_command("XS.LEN", STREAM)


def read_entries(reply):
    """[(id, fields-dict)] of a read's reply, whatever the protocol: RESP2 [[stream, entries]],
    RESP3 {stream: entries} (redis-py 8 speaks RESP3 by default: execute_command then returns the
    map; with protocol=3 its own xreadgroup returns {stream: [[(id, fields), ...]]})."""
    streams = reply.items() if isinstance(reply, dict) else reply or []
    out = []
    for _stream, entries in streams:
        if entries and isinstance(entries[0], list) and entries[0] and isinstance(entries[0][0], tuple):
            entries = [e for group in entries for e in group]
        out += [(i, pairs(f)) for i, f in entries]
    return out


def pairs(flat):
    if isinstance(flat, dict):
        return flat
    return dict(zip(flat[0::2], flat[1::2]))


def connect(args):
    # --protocol 2 / 3, or the client library's default (RESP3 since redis-py 8).
    kw = {"protocol": args.protocol} if args.protocol else {}
    return redis.Redis(host=args.host, port=args.port, decode_responses=True, **kw)


def produce(args):
    s = Streams(connect(args), args.names)
    s.group_create()
    pipe = s.r.pipeline(transaction=False)
    for n in range(args.jobs):
        s.add(pipe, n)
    pipe.execute()
    print(f"produced {args.jobs} jobs; stream length {s.length()}")


def do_job(s, consumer, entry_id, fields):
    """The work: square n. The result is stored once per job."""
    n = int(fields["n"])
    if not s.r.hsetnx(RESULTS, n, f"{n * n} by {consumer}"):
        s.r.hincrby("stats", "duplicates", 1)
    s.r.hincrby("stats", "done", 1)


def work(args):
    s = Streams(connect(args), args.names)
    s.group_create()
    taken = 0
    idle_rounds = 0
    next_claim = 0.0
    while True:
        batch = []
        # Recover the jobs of crashed workers first: pending for longer than --claim-idle.
        if time.monotonic() >= next_claim:
            next_claim = time.monotonic() + args.claim_idle / 2000
            start = "0-0"
            while True:
                nxt, claimed = s.autoclaim(args.name, args.claim_idle, start, 50)
                batch += claimed
                if nxt == "0-0":
                    break
                start = nxt
            if batch:
                print(f"{args.name}: claimed {len(batch)} jobs of a crashed worker", flush=True)
        batch += s.read(args.name, 10, 500)
        if not batch:
            idle_rounds += 1
            if args.exit_when_idle and idle_rounds * 0.5 >= args.exit_when_idle and not s.pending_count():
                print(f"{args.name}: queue empty, exiting", flush=True)
                return
            continue
        idle_rounds = 0
        for entry_id, fields in batch:
            taken += 1
            if args.crash_after and taken > args.crash_after:
                # A crash: the process dies with jobs taken and not acknowledged.
                print(f"{args.name}: crashing with {len(batch)} jobs taken", flush=True)
                os._exit(1)
            do_job(s, args.name, entry_id, fields)
            s.ack(entry_id)


def status(args):
    s = Streams(connect(args), args.names)
    stats = s.r.hgetall("stats")
    print(f"stream length {s.length()}, pending {s.pending_count()}, results {s.r.hlen(RESULTS)}, "
          f"done {stats.get('done', 0)}, duplicates {stats.get('duplicates', 0)}")


def demo(args):
    """Produce, run a worker that crashes after 25 jobs, then --workers - 1 others that recover its jobs, check."""
    r = connect(args)
    r.delete(STREAM, RESULTS, "stats")
    base = [sys.executable, __file__, "--host", args.host, "--port", str(args.port), "--names", args.names]
    if args.protocol:
        base += ["--protocol", str(args.protocol)]
    subprocess.run(base + ["produce", "--jobs", str(args.jobs)], check=True)
    deadline = time.monotonic() + args.timeout

    def worker(i, extra=()):
        return subprocess.Popen(base + ["work", "--name", f"w{i + 1}", "--claim-idle", str(args.claim_idle),
                                        "--exit-when-idle", "3", *extra])
    # The first worker runs alone until it crashes, so the crash happens whatever the machine's speed
    # (started together, the others could empty the queue before it took its 25th job).
    procs = [worker(0, ["--crash-after", "25"])]
    procs[0].wait(timeout=max(1, deadline - time.monotonic()))
    procs += [worker(i) for i in range(1, args.workers)]
    for p in procs:
        p.wait(timeout=max(1, deadline - time.monotonic()))
    s = Streams(r, args.names)
    results, pend = r.hlen(RESULTS), s.pending_count()
    status(args)
    crashed = procs[0].returncode != 0
    ok = results == args.jobs and pend == 0 and crashed
    print("demo:", "OK, every job done despite the crash" if ok else "FAILED")
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--names", choices=["module", "standard"], default="module")
    ap.add_argument("--protocol", type=int, choices=[2, 3], default=None, help="RESP version (default: the client's)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--jobs", type=int, default=1000)
    w = sub.add_parser("work")
    w.add_argument("--name", required=True)
    w.add_argument("--crash-after", type=int, default=0)
    w.add_argument("--claim-idle", type=int, default=2000, help="ms a job must be pending before it is claimed")
    w.add_argument("--exit-when-idle", type=float, default=0, help="exit after this many idle seconds (0: never)")
    sub.add_parser("status")
    d = sub.add_parser("demo")
    d.add_argument("--jobs", type=int, default=1000)
    d.add_argument("--workers", type=int, default=3)
    d.add_argument("--claim-idle", type=int, default=1000)
    d.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    {"produce": produce, "work": work, "status": status, "demo": demo}[args.cmd](args)


if __name__ == "__main__":
    main()
