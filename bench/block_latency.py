#!/usr/bin/env python3
"""Blocking-read latency and fan-out: XREAD/XREADGROUP BLOCK (built-in) vs XS.READ/XS.READGROUP
BLOCK (module), side by side on ONE redis-server that this program starts (on a free port, never
6379) with the module loaded, and stops at the end. Python standard library only: raw RESP over
sockets, selectors (epoll) for the many-client parts.

Measures (the two sides alternate, round by round, so drift and noise hit both alike):

1. Wake-up latency: a client is blocked (XREAD BLOCK 0 STREAMS k $, or XREADGROUP ... >), the
   writer sends XADD k * ..., the time from sending XADD to the blocked client having its whole
   reply. p50 / p90 / p99 / mean over --samples samples per side and command.
2. Fan-out on one key: --fanout clients blocked on one key (XREAD $), one XADD: the writer's XADD
   round trip (the server serves every waiter before it answers) and the time until the last
   client has its reply. Also --fanout XREADGROUP waiters on one group (one XADD serves one and
   re-checks the others): the XADD round trip.
3. Many keys: --keys keys x --per-key waiters (XREAD $), one pipeline of one XADD per key:
   time until all the XADD replies / all the waiters' replies arrived.

The constant client-side overhead (Python, loopback) is included in every figure, so the
module/built-in ratios are conservative (pulled towards 1).

Usage:
  python3 bench/block_latency.py [--module target/dist/libxstream.so] [--samples 2000]
                                 [--fanout 10000] [--keys 1000] [--per-key 10] [--rounds 5]
"""

import argparse
import os
import random
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from serverlib import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------------------------------
# RESP
# ------------------------------------------------------------------------------------------

def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def skip_value(buf, i):
    """Index just past the RESP value starting at buf[i], or -1 if incomplete."""
    j = buf.find(b"\r\n", i)
    if j < 0:
        return -1
    t = buf[i:i + 1]
    if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
        return j + 2
    n = int(buf[i + 1:j])
    if t in (b"$", b"!", b"="):
        if n < 0:
            return j + 2
        end = j + 2 + n + 2
        return end if len(buf) >= end else -1
    if t in (b"*", b"~", b">", b"%", b"|"):
        if n < 0:
            return j + 2
        k = j + 2
        for _ in range(n * (2 if t in (b"%", b"|") else 1)):
            k = skip_value(buf, k)
            if k < 0:
                return -1
        return k
    raise ValueError("bad RESP type %r" % t)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, *args):
        self.s.sendall(enc(*args))

    def read(self):
        """One whole reply (bytes)."""
        while True:
            if self.buf:
                end = skip_value(self.buf, 0)
                if end > 0:
                    r, self.buf = self.buf[:end], self.buf[end:]
                    return r
            d = self.s.recv(1 << 16)
            if not d:
                raise ConnectionError("server closed the connection")
            self.buf += d

    def cmd(self, *args):
        self.send(*args)
        r = self.read()
        if r.startswith(b"-"):
            raise RuntimeError("%s -> %s" % (args, r))
        return r

    def close(self):
        self.s.close()


def text(r):
    """Bulk/simple reply as str."""
    if r.startswith(b"$"):
        j = r.find(b"\r\n")
        return r[j + 2:-2].decode()
    return r[1:-2].decode()


# ------------------------------------------------------------------------------------------
# Server
# ------------------------------------------------------------------------------------------

class Server:
    def __init__(self, module, maxclients):
        self.dir = tempfile.mkdtemp(prefix="xstream-bench-")
        so = os.path.join(self.dir, "libxstream.so")
        shutil.copy(module, so)  # the build may overwrite the original while we run
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log"),
             "--save", "", "--appendonly", "no", "--daemonize", "no",
             "--protected-mode", "no", "--maxclients", str(maxclients),
             "--loadmodule", so],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        while True:
            try:
                c = Conn(self.port)
                if c.cmd("PING") == b"+PONG\r\n":
                    c.close()
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() - t0 > 10:
                raise RuntimeError("redis-server did not start; log in %s" % self.dir)
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # our own child only
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


SIDES = {
    "built-in": {"XADD": "XADD", "XREAD": "XREAD", "XREADGROUP": "XREADGROUP",
                 "XGROUP": "XGROUP", "pfx": "n"},
    "module": {"XADD": "XS.ADD", "XREAD": "XS.READ", "XREADGROUP": "XS.READGROUP",
               "XGROUP": "XS.GROUP", "pfx": "m"},
}


def blocked_clients(a):
    info = text(a.cmd("INFO", "clients"))
    for line in info.splitlines():
        if line.startswith("blocked_clients:"):
            return int(line.split(":")[1])
    raise RuntimeError("no blocked_clients in INFO")


def wait_blocked(a, n, timeout=60):
    t0 = time.time()
    while True:
        b = blocked_clients(a)
        if b >= n:
            return
        if time.time() - t0 > timeout:
            raise RuntimeError("only %d of %d clients blocked" % (b, n))
        time.sleep(0.002)


def wait_client_blocked(a, cid):
    while True:
        line = text(a.cmd("CLIENT", "LIST", "ID", cid))
        flags = [f for f in line.split() if f.startswith("flags=")]
        if flags and "b" in flags[0]:
            return
        time.sleep(0.0001)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def fmt_us(ns):
    return "%8.1f" % (ns / 1000.0)


# ------------------------------------------------------------------------------------------
# 1. Wake-up latency
# ------------------------------------------------------------------------------------------

def latency(srv, samples):
    a = Conn(srv.port)
    w = Conn(srv.port)
    r = Conn(srv.port)
    rid = int(r.cmd("CLIENT", "ID")[1:-2])
    res = {}
    for kind in ("XREAD", "XREADGROUP"):
        for side, s in SIDES.items():
            key = "%s:lat:%s" % (s["pfx"], kind)
            a.cmd(s["XADD"], key, "*", "f", "v")
            if kind == "XREADGROUP":
                a.cmd(s["XGROUP"], "CREATE", key, "g", "$")
            res[(kind, side)] = []
        # Warm-up, then the two sides alternate in random order.
        for i in range(samples + 50):
            order = list(SIDES.items())
            random.shuffle(order)
            for side, s in order:
                key = "%s:lat:%s" % (s["pfx"], kind)
                if kind == "XREAD":
                    r.send(s["XREAD"], "BLOCK", "0", "STREAMS", key, "$")
                else:
                    r.send(s["XREADGROUP"], "GROUP", "g", "c", "BLOCK", "0", "STREAMS", key, ">")
                wait_client_blocked(a, rid)
                t0 = time.perf_counter_ns()
                w.send(s["XADD"], key, "MAXLEN", "100", "*", "f", "v")
                rep = r.read()
                t1 = time.perf_counter_ns()
                w.read()
                if not (rep.startswith(b"*1") or rep.startswith(b"%1")):
                    raise RuntimeError("%s %s: unexpected reply %r" % (side, kind, rep[:80]))
                if i >= 50:
                    res[(kind, side)].append(t1 - t0)
    # Baseline: XADD round trip with no waiter.
    base = {}
    for side, s in SIDES.items():
        v = []
        for _ in range(samples):
            t0 = time.perf_counter_ns()
            w.cmd(s["XADD"], "%s:lat:plain" % s["pfx"], "MAXLEN", "100", "*", "f", "v")
            v.append(time.perf_counter_ns() - t0)
        base[side] = v
    for c in (a, w, r):
        c.close()
    return res, base


# ------------------------------------------------------------------------------------------
# 2 / 3. Fan-out
# ------------------------------------------------------------------------------------------

class Crowd:
    """n client connections, reused for every round (no TIME_WAIT storm)."""

    def __init__(self, port, n):
        self.socks = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks.append(s)
        self.sel = selectors.DefaultSelector()

    def send_each(self, cmds):
        """cmds[i]: bytes to send on socket i (blocking sends)."""
        for s, c in zip(self.socks, cmds):
            s.sendall(c)

    def read_all(self, errors_ok=False):
        """Reads one whole reply on every socket; returns the time the last one completed."""
        bufs = {}
        pending = len(self.socks)
        for s in self.socks:
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ)
            bufs[s] = b""
        last = None
        while pending:
            for key, _ in self.sel.select(timeout=30):
                s = key.fileobj
                d = s.recv(1 << 16)
                if not d:
                    raise ConnectionError("server closed a crowd connection")
                bufs[s] += d
                end = skip_value(bufs[s], 0)
                if end > 0:
                    if end != len(bufs[s]):
                        raise RuntimeError("more than one reply on a crowd connection")
                    if bufs[s].startswith(b"-") and not errors_ok:
                        raise RuntimeError("error reply %r" % bufs[s][:100])
                    self.sel.unregister(s)
                    s.setblocking(True)
                    pending -= 1
                    last = time.perf_counter_ns()
        return last

    def close(self):
        for s in self.socks:
            s.close()


def fanout_one_key(srv, crowd, rounds):
    a = Conn(srv.port)
    w = Conn(srv.port)
    n = len(crowd.socks)
    out = {}
    for side, s in SIDES.items():
        out[("XREAD", side)] = ([], [])
        out[("XREADGROUP", side)] = ([], [])
        key = "%s:fan" % s["pfx"]
        a.cmd(s["XADD"], key, "*", "f", "v")
        a.cmd(s["XGROUP"], "CREATE", key, "g", "$")
    for rnd in range(rounds):
        order = list(SIDES.items())
        random.shuffle(order)
        for side, s in order:
            key = "%s:fan" % s["pfx"]
            base = blocked_clients(a)
            crowd.send_each([enc(s["XREAD"], "BLOCK", "0", "STREAMS", key, "$")] * n)
            wait_blocked(a, base + n)
            t0 = time.perf_counter_ns()
            w.send(s["XADD"], key, "MAXLEN", "1000", "*", "f", "v")
            w.read()
            t1 = time.perf_counter_ns()
            t2 = crowd.read_all()
            out[("XREAD", side)][0].append(t1 - t0)
            out[("XREAD", side)][1].append(t2 - t0)

            # XREADGROUP: n waiters on one group; one XADD serves the first only.
            a.cmd(s["XGROUP"], "SETID", key, "g", "$")
            crowd.send_each([enc(s["XREADGROUP"], "GROUP", "g", "c%d" % (i % 50), "BLOCK", "0",
                                 "STREAMS", key, ">") for i in range(n)])
            wait_blocked(a, base + n)
            t0 = time.perf_counter_ns()
            w.send(s["XADD"], key, "MAXLEN", "1000", "*", "f", "v")
            w.read()
            t1 = time.perf_counter_ns()
            out[("XREADGROUP", side)][0].append(t1 - t0)
            # Release the others (not timed): destroying the group answers them NOGROUP.
            a.cmd(s["XGROUP"], "DESTROY", key, "g")
            crowd.read_all(errors_ok=True)
            a.cmd(s["XGROUP"], "CREATE", key, "g", "$")
            a.cmd("XTRIM" if side == "built-in" else "XS.TRIM", key, "MAXLEN", "0")
    a.close()
    w.close()
    return out


def fanout_many_keys(srv, crowd, nkeys, per_key, rounds):
    a = Conn(srv.port)
    w = Conn(srv.port)
    n = nkeys * per_key
    socks = crowd.socks[:n]
    sub = Crowd.__new__(Crowd)
    sub.socks = socks
    sub.sel = selectors.DefaultSelector()
    out = {}
    for side in SIDES:
        out[side] = ([], [])
    for rnd in range(rounds):
        order = list(SIDES.items())
        random.shuffle(order)
        for side, s in order:
            keys = ["%s:many:%d" % (s["pfx"], k) for k in range(nkeys)]
            base = blocked_clients(a)
            sub.send_each([enc(s["XREAD"], "BLOCK", "0", "STREAMS", keys[i % nkeys], "$")
                           for i in range(n)])
            wait_blocked(a, base + n)
            pipe = b"".join(enc(s["XADD"], k, "MAXLEN", "10", "*", "f", "v") for k in keys)
            t0 = time.perf_counter_ns()
            w.s.sendall(pipe)
            for _ in keys:
                w.read()
            t1 = time.perf_counter_ns()
            t2 = sub.read_all()
            out[side][0].append(t1 - t0)
            out[side][1].append(t2 - t0)
    a.close()
    w.close()
    return out


# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default=os.environ.get("XSTREAM_MODULE") or
                    os.path.join(ROOT, "target/dist/libxstream.so"))
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--fanout", type=int, default=10000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--per-key", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    random.seed(args.seed)
    if not os.path.exists(args.module):
        sys.exit("module not found: %s (make build)" % args.module)

    crowd_n = max(args.fanout, args.keys * args.per_key)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = crowd_n + 64
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
        soft = min(need, hard)
    if soft < need:
        crowd_n = soft - 64
        print("note: open files limit %d: crowd reduced to %d clients" % (soft, crowd_n))
        args.fanout = min(args.fanout, crowd_n)
        args.per_key = max(1, min(args.per_key, crowd_n // args.keys))

    srv = Server(args.module, crowd_n + 200)
    try:
        print("redis-server %s on port %d, module %s" % (
            text(Conn(srv.port).cmd("INFO", "server")).split("redis_version:")[1].split()[0],
            srv.port, args.module))

        res, base = latency(srv, args.samples)
        print("\n1. Wake-up latency, XADD sent -> blocked client has its reply (us), %d samples"
              % args.samples)
        print("   %-22s %8s %8s %8s %8s" % ("", "p50", "p90", "p99", "mean"))
        for kind in ("XREAD", "XREADGROUP"):
            for side in SIDES:
                v = res[(kind, side)]
                print("   %-22s %s %s %s %s" % ("%s %s" % (kind, side), fmt_us(pct(v, 50)),
                      fmt_us(pct(v, 90)), fmt_us(pct(v, 99)), fmt_us(statistics.mean(v))))
            b, m = res[(kind, "built-in")], res[(kind, "module")]
            print("   %-22s %8.2f %8.2f %8.2f %8.2f" % ("  ratio module/built-in",
                  pct(m, 50) / pct(b, 50), pct(m, 90) / pct(b, 90), pct(m, 99) / pct(b, 99),
                  statistics.mean(m) / statistics.mean(b)))
        for side in SIDES:
            v = base[side]
            print("   %-22s %s %s %s %s" % ("XADD alone " + side, fmt_us(pct(v, 50)),
                  fmt_us(pct(v, 90)), fmt_us(pct(v, 99)), fmt_us(statistics.mean(v))))

        crowd = Crowd(srv.port, crowd_n)
        fan_crowd = Crowd.__new__(Crowd)
        fan_crowd.socks = crowd.socks[:args.fanout]
        fan_crowd.sel = selectors.DefaultSelector()
        out = fanout_one_key(srv, fan_crowd, args.rounds)
        print("\n2. Fan-out: %d clients blocked on one key, one XADD (median of %d rounds, ms)"
              % (args.fanout, args.rounds))
        for side in SIDES:
            x, y = out[("XREAD", side)]
            print("   XREAD      %-9s XADD round trip %8.2f   last client served %8.2f"
                  % (side, statistics.median(x) / 1e6, statistics.median(y) / 1e6))
        bx, by = out[("XREAD", "built-in")]
        mx, my = out[("XREAD", "module")]
        print("   XREAD      ratio module/built-in:  XADD %.2f   last client %.2f"
              % (statistics.median(mx) / statistics.median(bx), statistics.median(my) / statistics.median(by)))
        for side in SIDES:
            x, _ = out[("XREADGROUP", side)]
            print("   XREADGROUP %-9s XADD round trip (1 served, %d re-checked) %8.2f"
                  % (side, args.fanout - 1, statistics.median(x) / 1e6))
        print("   XREADGROUP ratio module/built-in:  XADD %.2f" % (
            statistics.median(out[("XREADGROUP", "module")][0]) /
            statistics.median(out[("XREADGROUP", "built-in")][0])))

        out = fanout_many_keys(srv, crowd, args.keys, args.per_key, args.rounds)
        print("\n3. %d keys x %d waiters (XREAD $), one pipeline of %d XADD (median of %d rounds, ms)"
              % (args.keys, args.per_key, args.keys, args.rounds))
        for side in SIDES:
            x, y = out[side]
            print("   %-9s all XADD replies %8.2f   last client served %8.2f"
                  % (side, statistics.median(x) / 1e6, statistics.median(y) / 1e6))
        print("   ratio module/built-in: XADD replies %.2f   last client %.2f" % (
            statistics.median(out["module"][0]) / statistics.median(out["built-in"][0]),
            statistics.median(out["module"][1]) / statistics.median(out["built-in"][1])))
        crowd.close()
        a = Conn(srv.port)
        print("\nblocked_clients at the end: %d" % blocked_clients(a))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
