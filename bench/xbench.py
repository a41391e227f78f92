#!/usr/bin/env python3
"""xbench: the module's XS.* commands against Redis's built-in streams, side by side.

One redis-server (free port, temporary directory, the module loaded from a private copy) runs
every workload on three "arms", interleaved over several repetitions:

  n  built-in X* commands on keys xb:n:*
  m  the module's XS.* commands on keys xb:m:*
  a  built-in X* commands again, on keys xb:a:*   (the A/A run: its ratio to n is the noise floor)

Rep r runs the arms in the order n m a when r is even and a m n when it is odd (A B B A ...), so a
linear drift of the machine hits every arm alike. Each run is preceded by CONFIG RESETSTAT and
measured three ways:

  cmd time  server time inside the command, from INFO commandstats (usec / calls), sampled every
            20 ms during the run; the run's figure is the median over those windows, so a window in
            which the busy machine preempted the server in mid-command does not decide it
  proc CPU  the server main thread's CPU time (INFO cpu), divided by the operations
  client    operations per second seen by the client (redis-benchmark or this script)

Reported values are medians over the reps; a ratio is the median of the per-rep ratios. The
verdict uses the cmd-time ratio, which client noise on a shared machine cannot move. As root, the
server runs at nice -10 (--nice) for the same reason.

Only the Python 3.11 standard library is used (raw RESP over sockets); redis-benchmark is run
for the workloads it can express.

  python3 bench/xbench.py --quick         # < 3 minutes
  python3 bench/xbench.py                 # full run
  python3 bench/xbench.py --only xrange   # some workloads, no docs (add --docs to write them)

Writes bench/results/<timestamp>.json and regenerates docs/BENCHMARKS.md and docs/bench/*.svg.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from serverlib import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
DOC_PATH = os.path.join(ROOT, "docs", "BENCHMARKS.md")
SVG_DIR = os.path.join(ROOT, "docs", "bench")
ANALYSIS_PATH = os.path.join(ROOT, "bench", "analysis.md")

# Streams filled by this script get explicit IDs <BASE_MS + i // PER_MS>-<i % PER_MS> (entry i):
# ten entries per millisecond, the same IDs on every arm, so memory is compared on identical
# content, and redis-benchmark can pick random existing IDs: "1__rand_int__" is "1" followed by
# 12 digits, i.e. BASE_MS + a random number below -r.
BASE_MS = 10**12
PER_MS = 10

ARMS = ("n", "m", "a")
SMALL_STREAMS = 10_000   # streams of the mem-small-* workloads
MEM_REPS = 3             # fills per arm of each memory-per-entry case
SAMPLE_S = 0.02          # commandstats sampling period during a run
MIN_WINDOW_CALLS = 20    # a window with fewer calls is too coarse (usec are whole microseconds)
ARM_LABEL = {"n": "native", "m": "module", "a": "native A/A"}

MODES = {
    "quick": dict(
        reps=3, big=200_000, mid=100_000,
        mem_cases=[(100_000, "small"), (100_000, "64b"), (100_000, "sensor"), (100_000, "1ms"), (100_000, "5f")],
        trim_cases=[("big", 200_000)],
        save_n=500_000, add_n=25_000, add_p_n=120_000, maxlen_n=120_000, range10_n=80_000,
        range100_n=12_000, point_n=25_000, group_entries=15_000, xdel_n=10_000,
        pending_summary_n=20_000, block_iters=500, json_n=100_000, json_calls=4_000,
    ),
    # tiny sizes, only to check that the tool works (python3 bench/xbench.py --smoke --no-docs)
    "smoke": dict(
        reps=2, big=20_000, mid=10_000, mem_cases=[(10_000, "small"), (10_000, "64b"), (20_000, "small"),
                                                    (10_000, "sensor")],
        trim_cases=[("big", 20_000), ("sensor", 20_000)],
        save_n=50_000, add_n=3_000, add_p_n=10_000, maxlen_n=10_000, range10_n=5_000,
        range100_n=2_000, point_n=2_000, group_entries=2_000, xdel_n=1_000,
        pending_summary_n=2_000, block_iters=30, json_n=10_000, json_calls=400,
    ),
    "full": dict(
        reps=5, big=1_000_000, mid=100_000,
        mem_cases=[(100_000, "small"), (100_000, "64b"), (1_000_000, "small"), (1_000_000, "64b"),
                   (100_000, "sensor"), (1_000_000, "sensor"), (100_000, "1ms"), (100_000, "5f")],
        trim_cases=[("big", 1_000_000), ("sensor", 200_000)],
        save_n=5_000_000, add_n=100_000, add_p_n=500_000, maxlen_n=400_000, range10_n=300_000,
        range100_n=50_000, point_n=100_000, group_entries=50_000, xdel_n=10_000,
        pending_summary_n=50_000, block_iters=2000, json_n=200_000, json_calls=10_000,
    ),
}

# What each kind of row means; the verdict column uses these.
#   speed: value = cost per op (lower better); ratio = native / module (>= 1 means module as fast or faster)
#   memory: value = bytes (lower better); ratio = module / native (<= 1 means module as lean or leaner)
TARGETS = {
    "speed": (">=", 1.00),
    "memory": ("<=", 1.00),
    "info": (None, None),
}


def log(msg: str) -> None:
    print(f"[xbench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def C(arm: str, name: str) -> str:
    """The command name for an arm: XADD -> XS.ADD on the module arm."""
    return "XS." + name[1:] if arm == "m" else name


def stat_name(cmd: str) -> str:
    return cmd.lower()


def sid(i: int) -> bytes:
    """ID of entry i in streams filled by this script."""
    return b"%d-%d" % (BASE_MS + i // PER_MS, i % PER_MS)


# --------------------------------------------------------------------------------------------
# RESP client
# --------------------------------------------------------------------------------------------


class RedisError(Exception):
    pass


class _Incomplete(Exception):
    pass


def _b(x) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, int):
        return b"%d" % x
    return str(x).encode()


def enc(*args) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = _b(a)
        parts.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(parts)


class Redis:
    def __init__(self, port: int, timeout: float = 600.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _more(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        if self.pos:
            self.buf = self.buf[self.pos:] + chunk
            self.pos = 0
        else:
            self.buf += chunk

    def _parse(self, buf: bytes, pos: int):
        end = buf.find(b"\r\n", pos)
        if end < 0:
            raise _Incomplete
        t = buf[pos]
        if t == 36:  # $
            n = int(buf[pos + 1:end])
            if n < 0:
                return None, end + 2
            s = end + 2
            if s + n + 2 > len(buf):
                raise _Incomplete
            return buf[s:s + n], s + n + 2
        if t == 42:  # *
            n = int(buf[pos + 1:end])
            if n < 0:
                return None, end + 2
            p = end + 2
            out = []
            parse = self._parse
            for _ in range(n):
                v, p = parse(buf, p)
                out.append(v)
            return out, p
        if t == 58:  # :
            return int(buf[pos + 1:end]), end + 2
        if t == 43:  # +
            return buf[pos + 1:end], end + 2
        if t == 45:  # -
            return RedisError(buf[pos + 1:end].decode(errors="replace")), end + 2
        raise RedisError(f"unexpected RESP type byte {t!r}")

    def read_reply(self):
        while True:
            try:
                v, self.pos = self._parse(self.buf, self.pos)
                return v
            except _Incomplete:
                self._more()

    def read_bytes(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n:
            self._more()
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def call(self, *args):
        self.send(enc(*args))
        r = self.read_reply()
        if isinstance(r, RedisError):
            raise r
        return r

    def info(self, section: str) -> dict:
        raw = self.call("INFO", section).decode()
        out = {}
        for line in raw.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


def pipeline(conn: Redis, payloads: list[bytes], counts: list[int], on_reply=None, tick=None) -> int:
    """Sends batches while reading the previous batch's replies. Returns the error count;
    on_reply(batch_index, reply) sees every reply; tick() is called after every batch."""
    errors = 0
    if not payloads:
        return 0
    conn.send(payloads[0])
    for i in range(len(payloads)):
        if i + 1 < len(payloads):
            conn.send(payloads[i + 1])
        for _ in range(counts[i]):
            r = conn.read_reply()
            if isinstance(r, RedisError):
                errors += 1
                if errors == 1:
                    log(f"  error reply: {r}")
            if on_reply is not None:
                on_reply(i, r)
        if tick is not None:
            tick()
    return errors


def batched(cmds: list[bytes], size: int):
    payloads, counts = [], []
    for lo in range(0, len(cmds), size):
        chunk = cmds[lo:lo + size]
        payloads.append(b"".join(chunk))
        counts.append(len(chunk))
    return payloads, counts


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


class Server:
    def __init__(self, module_path: str, nice: int = 0):
        self.nice = nice
        self.dir = tempfile.mkdtemp(prefix="xbench-")
        self.module = os.path.join(self.dir, "libxstream-bench.so")
        shutil.copyfile(module_path, self.module)  # never load a .so a build may overwrite
        os.chmod(self.module, 0o755)
        self.port = free_port()
        self.proc = None

    def start(self) -> None:
        args = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", self.dir, "--dbfilename", "dump.rdb",
            "--logfile", os.path.join(self.dir, "redis.log"), "--daemonize", "no",
            "--enable-debug-command", "yes", "--enable-protected-configs", "yes",
            "--loadmodule", self.module,
        ]
        pre = None
        if self.nice:
            def pre():
                try:
                    os.nice(self.nice)
                except OSError:
                    pass
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pre)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("redis-server exited at start; log:\n" + self.log_tail())
            try:
                c = Redis(self.port, timeout=2)
                c.call("PING")
                c.close()
                return
            except (OSError, RedisError):
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING")

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "redis.log")) as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, server: Server, mode: str, cfg: dict, only: list[str] | None):
        self.srv = server
        self.port = server.port
        self.mode = mode
        self.cfg = cfg
        self.only = only
        self.perf = False
        self.ctl = Redis(self.port)
        self.mon = Redis(self.port)  # samples commandstats during runs
        self._watch: list[str] = []
        self._samples = [(0, 0)]
        self._last_tick = 0.0
        self.results: list[dict] = []
        self.notes: list[str] = []

    # -- selection ---------------------------------------------------------------------------
    def wanted(self, wid: str) -> bool:
        return not self.only or any(o in wid for o in self.only)

    def touches(self, *prefixes: str) -> bool:
        """Whether the selection needs a family of workloads (or the data they share)."""
        return not self.only or any(p in o or o in p for o in self.only for p in prefixes)

    # -- stats -------------------------------------------------------------------------------
    def reset(self, watch: list[str] | None = None) -> None:
        """CONFIG RESETSTAT before a run; watch = the commands whose commandstats tick() samples."""
        self.ctl.call("CONFIG", "RESETSTAT")
        self._cpu0 = self._cpu()
        self._watch = [stat_name(c) for c in (watch or [])]
        self._samples = [(0, 0)]
        self._last_tick = time.perf_counter()

    def tick(self, force: bool = False) -> None:
        """Samples the watched commands' (calls, usec) every SAMPLE_S during a run. The windowed
        estimate in collect() takes the median over these windows: a window in which the shared
        machine preempted the server in the middle of a command (which inflates that command's
        wall-clock usec by milliseconds) is an outlier and drops out."""
        if not self._watch:
            return
        now = time.perf_counter()
        if not force and now - self._last_tick < SAMPLE_S:
            return
        self._last_tick = now
        raw = self.mon.call("INFO", "commandstats")
        calls = usec = 0
        for name in self._watch:
            i = raw.find(b"cmdstat_" + name.encode() + b":")
            if i < 0:
                continue
            j = raw.find(b"\r\n", i)
            d = dict(kv.split(b"=") for kv in raw[raw.find(b":", i) + 1:j].split(b","))
            calls += int(d[b"calls"])
            usec += int(d[b"usec"])
        self._samples.append((calls, usec))

    def windowed(self, calls_per_op: float):
        """Median over the sampling windows (weighted by calls) of usec per call, scaled per op."""
        ws = []
        for (c0, u0), (c1, u1) in zip(self._samples, self._samples[1:]):
            dc, du = c1 - c0, u1 - u0
            if dc >= MIN_WINDOW_CALLS:
                ws.append((du / dc, dc))
        if len(ws) < 5:
            return None, len(ws)
        ws.sort()
        total = sum(w for _, w in ws)
        acc = 0
        for v, w in ws:
            acc += w
            if acc * 2 >= total:
                return v * calls_per_op, len(ws)
        return ws[-1][0] * calls_per_op, len(ws)

    def _cpu(self) -> float:
        i = self.ctl.info("cpu")
        if "used_cpu_user_main_thread" in i:
            return float(i["used_cpu_user_main_thread"]) + float(i["used_cpu_sys_main_thread"])
        return float(i["used_cpu_user"]) + float(i["used_cpu_sys"])

    def cmdstats(self) -> dict:
        out = {}
        for k, v in self.ctl.info("commandstats").items():
            if not k.startswith("cmdstat_"):
                continue
            d = dict(kv.split("=") for kv in v.split(","))
            out[k[8:]] = (int(d["calls"]), int(d["usec"]), int(d.get("failed_calls", 0)) + int(d.get("rejected_calls", 0)))
        return out

    def collect(self, cmds: list[str], ops: int, elapsed: float, min_calls: int = 1) -> dict:
        """After a run: cmd CPU per op (sum over cmds), proc CPU per op, client ops/s."""
        proc_cpu = self._cpu() - self._cpu0
        st = self.cmdstats()
        calls = usec = failed = 0
        for c in cmds:
            ca, us, fa = st.get(stat_name(c), (0, 0, 0))
            calls += ca
            usec += us
            failed += fa
        if failed:
            raise RuntimeError(f"{failed} failed calls of {cmds}")
        if calls < min_calls:
            raise RuntimeError(f"expected at least {min_calls} calls of {cmds}, commandstats has {calls}")
        win, nwin = (None, 0)
        if self._watch and calls:
            self.tick(force=True)
            win, nwin = self.windowed(calls / ops)
        return {
            "cmd_us": win if win is not None else usec / ops,
            "cmd_total_us": usec / ops,
            "windows": nwin,
            "proc_us": proc_cpu * 1e6 / ops,
            "client_ops": ops / elapsed if elapsed > 0 else None,
            "ops": ops,
            "calls": calls,
            "elapsed_s": elapsed,
        }

    def used_memory(self) -> int:
        """used_memory less the clients' buffers (mem_clients_normal): the server shrinks an idle
        client's query buffer whenever its cron gets to it, and 32 KB given back in the middle of
        a fill was counted against that fill (a 100,000-entry built-in fill measured 14.80 bytes
        per entry right after the warm-up, 15.13 every other time)."""
        time.sleep(0.05)  # let the server notice closed client connections
        c = Redis(self.port)
        try:
            m = c.info("memory")
            return int(m["used_memory"]) - int(m.get("mem_clients_normal", 0))
        finally:
            c.close()

    def delete(self, *keys) -> None:
        if keys:
            self.ctl.call("DEL", *keys)

    # -- redis-benchmark ---------------------------------------------------------------------
    def rb(self, args: list[str], n: int, clients: int = 50, pipe: int = 1, keyspace: int | None = None):
        cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port), "-c", str(clients), "-n", str(n),
               "-P", str(pipe), "--csv"]
        if keyspace:
            cmd += ["-r", str(keyspace)]
        cmd += args
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdout=out, stderr=err)
            deadline = time.time() + 900
            while p.poll() is None:
                time.sleep(SAMPLE_S)
                self.tick(force=True)
                if time.time() > deadline:
                    p.kill()
            elapsed = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        if p.returncode != 0:
            raise RuntimeError(f"redis-benchmark failed: {stderr.strip()[:300]}")
        rps = None
        for line in stdout.splitlines():
            cells = [c.strip('"') for c in line.split('","')]
            if len(cells) >= 2 and cells[0] != "test":
                try:
                    rps = float(cells[1])
                except ValueError:
                    pass
        if rps is None:
            raise RuntimeError(f"no rps in redis-benchmark output: {stdout[-300:]} {stderr[-300:]}")
        return rps, elapsed

    # -- filling -----------------------------------------------------------------------------
    def fill(self, arm: str, key: str, n: int, kind: str = "small", start: int = 0, batch: int = 10_000) -> float:
        """XADD entries start..start+n-1 (explicit IDs, see sid) with one field 'f'; returns seconds."""
        cmd = C(arm, "XADD").encode()
        kb = key.encode()
        head = b"*5\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(cmd), cmd, len(kb), kb)
        fmt = head + b"$15\r\n%d-%d\r\n$1\r\nf\r\n$%d\r\n%b\r\n"
        if kind == "small":
            def gen(lo, hi):
                return b"".join([fmt % (BASE_MS + i // PER_MS, i % PER_MS, len(v), v)
                                 for i in range(lo, hi) for v in (b"%d" % i,)])
        elif kind == "1ms":
            # One entry per millisecond, one field, integer value.
            def gen(lo, hi):
                return b"".join([fmt % (BASE_MS + i, 0, len(v), v) for i in range(lo, hi) for v in (b"%d" % i,)])
        elif kind == "sensor":
            # Sensor readings: one per millisecond, `temp <float text> hum <int>`.
            head7 = b"*7\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(cmd), cmd, len(kb), kb)
            sfmt = head7 + b"$15\r\n%d-0\r\n$4\r\ntemp\r\n$5\r\n%b\r\n$3\r\nhum\r\n$2\r\n%d\r\n"

            def gen(lo, hi):
                return b"".join([sfmt % (BASE_MS + i, b"%2d.%02d" % (18 + i * 7 % 13, i * 37 % 100), 30 + i * 11 % 60)
                                 for i in range(lo, hi)])
        elif kind == "5f":
            # Five fields with integer values, ten entries per millisecond.
            head13 = b"*13\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(cmd), cmd, len(kb), kb)

            def gen(lo, hi):
                out = []
                for i in range(lo, hi):
                    parts = [head13, b"$15\r\n%d-%d\r\n" % (BASE_MS + i // PER_MS, i % PER_MS)]
                    for j in range(5):
                        v = b"%d" % (i * (j + 3) % 100_000)
                        parts.append(b"$2\r\nf%d\r\n$%d\r\n%b\r\n" % (j, len(v), v))
                    out.append(b"".join(parts))
                return b"".join(out)
        else:
            pool = [hashlib.sha256(b"%d" % j).hexdigest().encode() for j in range(1021)]

            def gen(lo, hi):
                return b"".join([fmt % (BASE_MS + i // PER_MS, i % PER_MS, 64, pool[i % 1021]) for i in range(lo, hi)])
        conn = Redis(self.port)
        t0 = time.perf_counter()
        try:
            bounds = [(lo, min(lo + batch, start + n)) for lo in range(start, start + n, batch)]
            conn.send(gen(*bounds[0]))
            for k, (lo, hi) in enumerate(bounds):
                if k + 1 < len(bounds):
                    conn.send(gen(*bounds[k + 1]))
                cnt = hi - lo
                data = conn.read_bytes(22 * cnt)  # each reply is $15\r\n<15-byte id>\r\n
                if data.count(b"$15\r\n") != cnt:
                    raise RuntimeError(f"fill {key}: unexpected replies: {data[:200]!r}")
        finally:
            conn.close()
        return time.perf_counter() - t0

    # -- the interleaved loop ----------------------------------------------------------------
    def interleave(self, wid: str, run, arms=ARMS, reps: int | None = None):
        """run(arm, rep) -> measurement dict. Returns {arm: [dict per rep]}."""
        reps = self.cfg["reps"] if reps is None else reps
        out = {a: [] for a in arms}
        for r in range(reps):
            order = arms if r % 2 == 0 else tuple(reversed(arms))
            for arm in order:
                prof = self.perf_start(wid) if (self.perf and arm == "m" and r == 0) else None
                try:
                    out[arm].append(run(arm, r))
                finally:
                    if prof:
                        self.perf_stop(wid, prof)
        return out

    def perf_start(self, wid: str):
        data = os.path.join(self.srv.dir, f"perf-{wid}.data")
        p = subprocess.Popen(["perf", "record", "-F", "999", "--call-graph", "dwarf,16384", "-p",
                              str(self.srv.proc.pid), "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        return p, data

    def perf_stop(self, wid: str, prof) -> None:
        """Writes bench/results/perf-<wid>.txt: the server's flat profile and the inclusive one
        (self and children) while the module arm of the first rep ran."""
        p, data = prof
        p.send_signal(signal.SIGINT)
        p.wait()
        os.makedirs(RESULTS_DIR, exist_ok=True)
        txt = os.path.join(RESULTS_DIR, f"perf-{wid}.txt")
        with open(txt, "w") as f:
            for extra in (["--no-children"], ["--children"]):
                r = subprocess.run(["perf", "report", "-i", data, "--sort", "sym", "--stdio", "-g", "none",
                                    "--percent-limit", "0.7"] + extra, capture_output=True, text=True)
                f.write(f"==== perf report {' '.join(extra)} ====\n")
                f.write("\n".join(l for l in r.stdout.splitlines() if l and not l.startswith("#")) + "\n\n")
        log(f"  perf profile of the module arm: {os.path.relpath(txt, ROOT)}")

    def record(self, wid: str, title: str, kind: str, unit: str, data: dict, group: str,
               metrics=("cmd_us", "proc_us", "client_ops"), note: str = "", skipped: str = ""):
        row = {"id": wid, "title": title, "kind": kind, "unit": unit, "group": group, "runs": data,
               "note": note, "skipped": skipped, "metrics": list(metrics)}
        row["summary"] = summarize(row)
        self.results.append(row)
        s = row["summary"]
        if skipped and not s.get("ratio"):
            log(f"  {wid}: skipped: {skipped}")
        else:
            log(f"  {wid}: native {fmt_val(s.get('n'), unit)}  module {fmt_val(s.get('m'), unit)}  "
                f"ratio {fmt_ratio(s.get('ratio'))}  A/A {fmt_ratio(s.get('aa'))}"
                + (f"  client ratio {fmt_ratio(s.get('client_ratio'))}" if s.get("client_ratio") else ""))

    def guarded(self, wid: str, fn, force: bool = False):
        if not force and not self.wanted(wid):
            return
        log(f"{wid} ...")
        try:
            fn()
        except Exception as e:  # one broken workload must not sink the run
            log(f"  {wid}: ERROR {type(e).__name__}: {e}")
            self.results.append({"id": wid, "title": wid, "kind": "info", "unit": "", "group": "error",
                                 "runs": {}, "note": "", "skipped": f"error: {type(e).__name__}: {e}",
                                 "metrics": [], "summary": {}})
            for c in (self.ctl, self.mon):
                try:
                    c.close()
                except Exception:
                    pass
            self.ctl = Redis(self.port)
            self.mon = Redis(self.port)
            self._watch = []

    # ========================================================================================
    # Workloads
    # ========================================================================================

    def setup_streams(self) -> None:
        """Memory per entry (one fill per arm and case, on a scratch key, deleted afterwards), then
        the streams the read workloads use: xb:<arm>:big (cfg big entries) and xb:<arm>:mid (cfg mid
        entries), filled in alternating chunks so that the three arms' nodes are spread over the
        heap alike (a stream filled into freshly grown memory reads faster than one filled into
        the holes of a deleted one, which would show up as an A/A difference)."""
        cfg = self.cfg
        for n, kind in cfg["mem_cases"]:
            wid = f"mem-{n // 1000}k-{kind}" if n < 1_000_000 else f"mem-{n // 1_000_000}M-{kind}"
            if not self.wanted(wid):
                continue
            log(f"{wid} ...")
            # MEM_REPS fills per arm, in the order n m a, then a m n, ...: the server gives memory
            # back at moments of its own (a first fill after start measured 2% under the same
            # fill later, on the built-in arm), and the median of the per-rep ratios outvotes one
            # such fill.
            data = {arm: [] for arm in ARMS}
            for rep in range(MEM_REPS):
                for arm in (ARMS if rep % 2 == 0 else ARMS[::-1]):
                    key = f"xb:{arm}:mem"
                    self.delete(key)
                    before = self.used_memory()
                    secs = self.fill(arm, key, n, kind)
                    after = self.used_memory()
                    mu = int(self.ctl.call("MEMORY", "USAGE", key, "SAMPLES", "0"))
                    ln = int(self.ctl.call(C(arm, "XLEN"), key))
                    if ln != n:
                        raise RuntimeError(f"{key}: length {ln}, expected {n}")
                    data[arm].append({"bytes_per_entry": (after - before) / n, "memory_usage_per_entry": mu / n,
                                      "fill_s": secs, "fill_ops": n / secs})
                    self.delete(key)
            vdesc = {"small": "1 field, value = decimal counter",
                     "64b": "1 field, 64-byte value",
                     "sensor": "one per ms: temp <float text>, hum <int>",
                     "1ms": "one per ms, 1 field, integer value",
                     "5f": "5 fields, integer values"}[kind]
            self.record(wid, f"bytes per entry, {n:,} entries ({vdesc})", "memory", "B", data, "memory",
                        metrics=("bytes_per_entry", "memory_usage_per_entry"),
                        note="used_memory delta ÷ entries (MEMORY USAGE SAMPLES 0 ÷ entries below it)")
        for name, n, needed in (("big", cfg["big"], ("xrange", "xrevrange", "xtrim", "xdel")),
                                ("mid", cfg["mid"], ("xreadgroup", "xpending", "xautoclaim", "mem-pending"))):
            if not self.touches(*needed):
                continue
            log(f"filling xb:*:{name} ({n:,} entries per arm, interleaved) ...")
            for arm in ARMS:
                self.delete(f"xb:{arm}:{name}")
            chunk = 20_000
            for lo in range(0, n, chunk):
                for arm in ARMS:
                    self.fill(arm, f"xb:{arm}:{name}", min(chunk, n - lo), "small", start=lo)
            for arm in ARMS:
                ln = int(self.ctl.call(C(arm, "XLEN"), f"xb:{arm}:{name}"))
                if ln != n:
                    raise RuntimeError(f"xb:{arm}:{name}: length {ln}, expected {n}")

    # -- XADD --------------------------------------------------------------------------------
    def xadd_workloads(self) -> None:
        cfg = self.cfg
        fields = {
            "1f": ["f", "1"],
            "64b": ["f", hashlib.sha256(b"v").hexdigest()],
            "5f": ["f1", "1", "f2", "2", "f3", "3", "f4", "4", "f5", "5"],
        }
        fdesc = {"1f": "1 small field", "64b": "one 64-byte value", "5f": "5 small fields"}
        for pipe in (1, 16):
            for fk, fv in fields.items():
                wid = f"xadd-{fk}-p{pipe}"
                n = cfg["add_n"] if pipe == 1 else cfg["add_p_n"]

                def run(arm, rep, fv=fv, pipe=pipe, n=n, wid=wid):
                    key = f"xb:{arm}:{wid}:{rep}"
                    self.delete(key)
                    self.reset([C(arm, "XADD")])
                    rps, el = self.rb([C(arm, "XADD"), key, "*"] + fv, n, 50, pipe)
                    m = self.collect([C(arm, "XADD")], n, el, min_calls=n)
                    m["client_ops"] = rps
                    self.delete(key)
                    return m

                self.guarded(wid, lambda wid=wid, run=run, pipe=pipe, fk=fk: self.record(
                    wid, f"XADD * {fdesc[fk]}, 50 clients" + (f", pipeline {pipe}" if pipe > 1 else ", unpipelined"),
                    "speed", "us", self.interleave(wid, run), "XADD"))

        for mode_tok, wid in (("~", "xadd-maxlen-approx"), ("=", "xadd-maxlen-exact")):
            def run(arm, rep, mode_tok=mode_tok, wid=wid):
                key = f"xb:{arm}:{wid}:{rep}"
                self.delete(key)
                warm = [enc(C(arm, "XADD"), key, "MAXLEN", mode_tok, "1000", "*", "f", "1")] * 3000
                pipeline(self.ctl, *batched(warm, 1000))
                self.reset([C(arm, "XADD")])
                n = cfg["maxlen_n"]
                rps, el = self.rb([C(arm, "XADD"), key, "MAXLEN", mode_tok, "1000", "*", "f", "1"], n, 50, 16)
                m = self.collect([C(arm, "XADD")], n, el, min_calls=n)
                m["client_ops"] = rps
                self.delete(key)
                return m

            self.guarded(wid, lambda wid=wid, run=run, mode_tok=mode_tok: self.record(
                wid, f"XADD MAXLEN {mode_tok} 1000 * (steady state), 50 clients, pipeline 16", "speed", "us",
                self.interleave(wid, run), "XADD"))

    # -- reads -------------------------------------------------------------------------------
    def range_workloads(self) -> None:
        cfg = self.cfg
        big = cfg["big"]
        ks = big // PER_MS
        specs = [
            ("xrange-10", "XRANGE", ["1__rand_int__", "+", "COUNT", "10"], cfg["range10_n"], "XRANGE <random id> + COUNT 10"),
            ("xrange-100", "XRANGE", ["1__rand_int__", "+", "COUNT", "100"], cfg["range100_n"], "XRANGE <random id> + COUNT 100"),
            ("xrevrange-10", "XREVRANGE", ["1__rand_int__", "-", "COUNT", "10"], cfg["range10_n"], "XREVRANGE <random id> - COUNT 10"),
        ]
        for wid, cmd, tail, n, title in specs:
            def run(arm, rep, cmd=cmd, tail=tail, n=n):
                self.reset([C(arm, cmd)])
                rps, el = self.rb([C(arm, cmd), f"xb:{arm}:big"] + tail, n, 50, 16, keyspace=ks)
                m = self.collect([C(arm, cmd)], n, el, min_calls=n)
                m["client_ops"] = rps
                return m

            self.guarded(wid, lambda wid=wid, run=run, title=title: self.record(
                wid, f"{title} on {big:,} entries, 50 clients, pipeline 16", "speed", "us",
                self.interleave(wid, run), "read"))

        wid = "xrange-point"

        def run_point(arm, rep):
            rnd = random.Random(1000 + rep)
            key = f"xb:{arm}:big"
            cmdname = C(arm, "XRANGE")
            cmds = []
            for _ in range(cfg["point_n"]):
                i = rnd.randrange(big)
                s = sid(i)
                cmds.append(enc(cmdname, key, s, s))
            payloads, counts = batched(cmds, 500)
            bad = [0]

            def check(_i, r):
                if not (isinstance(r, list) and len(r) == 1):
                    bad[0] += 1
            self.reset([cmdname])
            t0 = time.perf_counter()
            errs = pipeline(self.ctl, payloads, counts, check, self.tick)
            el = time.perf_counter() - t0
            if errs or bad[0]:
                raise RuntimeError(f"point lookups: {errs} errors, {bad[0]} replies without exactly one entry")
            return self.collect([cmdname], len(cmds), el, min_calls=len(cmds))

        self.guarded(wid, lambda: self.record(
            wid, f"XRANGE id id (point lookup of a random existing ID) on {big:,} entries, 1 client, pipeline 500",
            "speed", "us", self.interleave(wid, run_point), "read"))

    # -- consumer groups ---------------------------------------------------------------------
    def group_workloads(self) -> None:
        cfg = self.cfg
        for nc in (1, 4):
            wid = f"xreadgroup-{nc}c"

            def run(arm, rep, nc=nc):
                key = f"xb:{arm}:mid"
                g = f"g{rep}"
                self.ctl.call(C(arm, "XGROUP"), "CREATE", key, g, "0")
                conns = [Redis(self.port) for _ in range(nc)]
                rg = [enc(C(arm, "XREADGROUP"), "GROUP", g, f"c{j}", "COUNT", "10", "STREAMS", key, ">") for j in range(nc)]
                ackname = C(arm, "XACK")
                target = cfg["group_entries"]
                consumed = 0
                self.reset([C(arm, "XREADGROUP"), ackname])
                t0 = time.perf_counter()
                while consumed < target:
                    for j, c in enumerate(conns):
                        c.send(rg[j])
                    replies = [c.read_reply() for c in conns]
                    acks = []
                    for j, r in enumerate(replies):
                        if isinstance(r, RedisError):
                            raise r
                        if not r:
                            continue
                        ids = [e[0] for e in r[0][1]]
                        if ids:
                            conns[j].send(enc(ackname, key, g, *ids))
                            acks.append((j, len(ids)))
                    if not acks:
                        raise RuntimeError("stream exhausted before the target")
                    for j, k in acks:
                        a = conns[j].read_reply()
                        if a != k:
                            raise RuntimeError(f"XACK answered {a!r}, expected {k}")
                        consumed += k
                    self.tick()
                el = time.perf_counter() - t0
                m = self.collect([C(arm, "XREADGROUP"), ackname], consumed / 10, el)
                m["client_ops"] = consumed / el  # entries per second
                for c in conns:
                    c.close()
                self.ctl.call(C(arm, "XGROUP"), "DESTROY", key, g)
                return m

            self.guarded(wid, lambda wid=wid, run=run, nc=nc: self.record(
                wid, f"XREADGROUP COUNT 10 + XACK of the 10 IDs, {nc} consumer{'s' if nc > 1 else ''} (lock-step)",
                "speed", "us", self.interleave(wid, run), "groups",
                note="cost per 10-entry read+ack; client figure = entries/s"))

    def pending_setup(self) -> None:
        """Group 'pel' on xb:<arm>:mid with every entry pending for consumer c1; bytes per pending entry."""
        mid = self.cfg["mid"]
        data = {}
        for arm in ARMS:
            key = f"xb:{arm}:mid"
            self.ctl.call(C(arm, "XGROUP"), "CREATE", key, "pel", "0")
            before = self.used_memory()
            conn = Redis(self.port)
            cmds = [enc(C(arm, "XREADGROUP"), "GROUP", "pel", "c1", "COUNT", "1000", "STREAMS", key, ">")] * (mid // 1000)
            errs = pipeline(conn, *batched(cmds, 10))
            conn.close()
            if errs:
                raise RuntimeError("XREADGROUP errors while building the PEL")
            after = self.used_memory()
            summ = self.ctl.call(C(arm, "XPENDING"), key, "pel")
            if summ[0] != mid:
                raise RuntimeError(f"{key}: {summ[0]} pending, expected {mid}")
            data[arm] = [{"bytes_per_entry": (after - before) / mid}]
        if self.wanted("mem-pending"):
            self.record("mem-pending", f"bytes per pending entry ({mid:,} pending in one group, one consumer)",
                        "memory", "B", data, "memory", metrics=("bytes_per_entry",),
                        note="used_memory delta of XREADGROUP over the whole stream / entries")

    def small_streams_workload(self) -> None:
        """Many small streams (per-tenant queues): what a stream of one entry costs, then what its
        first group, first consumer and one pending entry add, per stream (used_memory deltas
        over SMALL_STREAMS of them, filled with one pipeline per step)."""
        n = SMALL_STREAMS
        stream, group = {}, {}
        for arm in ARMS:
            keys = [f"xb:{arm}:small:{i}" for i in range(n)]
            conn = Redis(self.port)
            steps = [
                [enc(C(arm, "XADD"), k, "1-1", "f", "v") for k in keys],
                [enc(C(arm, "XGROUP"), "CREATE", k, "g", "0") for k in keys]
                + [enc(C(arm, "XREADGROUP"), "GROUP", "g", "c", "COUNT", "1", "STREAMS", k, ">") for k in keys],
            ]
            used = [self.used_memory()]
            for cmds in steps:
                if pipeline(conn, *batched(cmds, 1000)):
                    raise RuntimeError("errors while building the small streams")
                used.append(self.used_memory())
            conn.close()
            summ = self.ctl.call(C(arm, "XPENDING"), keys[-1], "g")
            if summ[0] != 1:
                raise RuntimeError(f"{keys[-1]}: {summ[0]} pending, expected 1")
            stream[arm] = [{"bytes_per_entry": (used[1] - used[0]) / n}]
            group[arm] = [{"bytes_per_entry": (used[2] - used[1]) / n}]
            for lo in range(0, n, 1000):
                self.ctl.call("DEL", *keys[lo:lo + 1000])
        self.record("mem-small-stream", f"bytes per stream, {n:,} streams of one entry", "memory", "B", stream,
                    "memory", metrics=("bytes_per_entry",), note="used_memory delta ÷ streams")
        self.record("mem-small-group", f"bytes per stream added by a group, a consumer and one pending entry, "
                    f"{n:,} streams", "memory", "B", group, "memory", metrics=("bytes_per_entry",),
                    note="used_memory delta ÷ streams (XGROUP CREATE, then XREADGROUP COUNT 1 of the entry)")

    def pel_workloads(self) -> None:
        cfg = self.cfg
        mid = cfg["mid"]
        starts = [sid(k) for k in range(0, mid, 100)]

        wid = "xpending-summary"

        def run_sum(arm, rep):
            cmd = C(arm, "XPENDING")
            cmds = [enc(cmd, f"xb:{arm}:mid", "pel")] * cfg["pending_summary_n"]
            payloads, counts = batched(cmds, 1000)
            self.reset([cmd])
            t0 = time.perf_counter()
            errs = pipeline(self.ctl, payloads, counts, None, self.tick)
            el = time.perf_counter() - t0
            if errs:
                raise RuntimeError("XPENDING errors")
            return self.collect([cmd], len(cmds), el, min_calls=len(cmds))

        self.guarded(wid, lambda: self.record(
            wid, f"XPENDING key group (summary) with {mid:,} pending, pipeline 1000", "speed", "us",
            self.interleave(wid, run_sum), "groups"))

        wid = "xpending-sweep"

        def run_sweep(arm, rep):
            cmd = C(arm, "XPENDING")
            cmds = [enc(cmd, f"xb:{arm}:mid", "pel", s, "+", "100") for s in starts]
            payloads, counts = batched(cmds, 50)
            n_seen = [0]

            def check(_i, r):
                if isinstance(r, list):
                    n_seen[0] += len(r)
            self.reset([cmd])
            t0 = time.perf_counter()
            errs = pipeline(self.ctl, payloads, counts, check, self.tick)
            el = time.perf_counter() - t0
            if errs or n_seen[0] != mid:
                raise RuntimeError(f"XPENDING sweep: {errs} errors, {n_seen[0]} entries seen, expected {mid}")
            return self.collect([cmd], len(cmds), el, min_calls=len(cmds))

        self.guarded(wid, lambda: self.record(
            wid, f"XPENDING key group <start> + 100 sweep over {mid:,} pending", "speed", "us",
            self.interleave(wid, run_sweep), "groups", note="cost per call (100 entries)"))

        wid = "xautoclaim-sweep"

        def run_claim(arm, rep):
            cmd = C(arm, "XAUTOCLAIM")
            consumer = "c2" if rep % 2 == 0 else "c1"
            cmds = [enc(cmd, f"xb:{arm}:mid", "pel", consumer, "0", s, "COUNT", "100") for s in starts]
            payloads, counts = batched(cmds, 50)
            n_seen = [0]

            def check(_i, r):
                if isinstance(r, list):
                    n_seen[0] += len(r[1])
            self.reset([cmd])
            t0 = time.perf_counter()
            errs = pipeline(self.ctl, payloads, counts, check, self.tick)
            el = time.perf_counter() - t0
            if errs or n_seen[0] != mid:
                raise RuntimeError(f"XAUTOCLAIM sweep: {errs} errors, {n_seen[0]} claimed, expected {mid}")
            return self.collect([cmd], len(cmds), el, min_calls=len(cmds))

        self.guarded(wid, lambda: self.record(
            wid, f"XAUTOCLAIM key group c 0 <cursor> COUNT 100 sweep over {mid:,} pending", "speed", "us",
            self.interleave(wid, run_claim), "groups", note="cost per call (100 entries claimed, with their data)"))

    # -- deletion ----------------------------------------------------------------------------
    def delete_workloads(self) -> None:
        cfg = self.cfg
        big = cfg["big"]
        for src_name, n in cfg["trim_cases"]:
            if src_name != "big" and not any(self.wanted(f"xtrim-{st}-half-{src_name}") for st in ("maxlen", "minid")):
                continue
            src_key = "big" if src_name == "big" else "trimsrc"
            if src_name != "big":
                log(f"filling xb:*:trimsrc ({n:,} {src_name} entries per arm, interleaved) ...")
                for arm in ARMS:
                    self.delete(f"xb:{arm}:trimsrc")
                for lo in range(0, n, 20_000):
                    for arm in ARMS:
                        self.fill(arm, f"xb:{arm}:trimsrc", min(20_000, n - lo), src_name, start=lo)
            for strategy in ("maxlen", "minid"):
                wid = f"xtrim-{strategy}-half-{src_name}"
                if not self.wanted(wid):
                    continue
                if strategy == "maxlen":
                    threshold = str(n // 2)
                else:
                    half = n - n // 2   # MINID keeps the entries from this one on
                    threshold = (sid(half) if src_name == "big" else b"%d-0" % (BASE_MS + half)).decode()

                def run_trim(arm, rep, strategy=strategy, threshold=threshold, n=n, src_key=src_key):
                    src, tmp = f"xb:{arm}:{src_key}", f"xb:{arm}:tmp"
                    self.delete(tmp)
                    self.ctl.call("COPY", src, tmp)
                    self.reset()
                    cmd = C(arm, "XTRIM")
                    t0 = time.perf_counter()
                    r = self.ctl.call(cmd, tmp, strategy.upper(), "=", threshold)
                    el = time.perf_counter() - t0
                    if r != n - n // 2:
                        raise RuntimeError(f"XTRIM {strategy} removed {r}, expected {n - n // 2}")
                    m = self.collect([cmd], 1, el)
                    m["client_ops"] = 1 / el
                    self.delete(tmp)
                    return m

                desc = "1 field, ten per ms" if src_name == "big" else "sensor readings, one per ms"
                self.guarded(wid, lambda wid=wid, strategy=strategy, threshold=threshold, n=n, desc=desc, run_trim=run_trim:
                             self.record(wid, f"XTRIM {strategy.upper()} = half of a {n:,}-entry stream ({desc}; one call)",
                                         "speed", "us", self.interleave(wid, run_trim), "delete",
                                         note=f"the stream is a COPY made before the timing; threshold {threshold}"))
            if src_name != "big":
                for arm in ARMS:
                    self.delete(f"xb:{arm}:trimsrc")

        wid = "xdel-10k"

        def run_del(arm, rep):
            src, tmp = f"xb:{arm}:big", f"xb:{arm}:tmp"
            self.delete(tmp)
            self.ctl.call("COPY", src, tmp)
            rnd = random.Random(2000 + rep)
            idx = rnd.sample(range(big), cfg["xdel_n"])
            cmd = C(arm, "XDEL")
            cmds = [enc(cmd, tmp, sid(i)) for i in idx]
            payloads, counts = batched(cmds, 1000)
            bad = [0]

            def check(_i, r):
                if r != 1:
                    bad[0] += 1
            self.reset([cmd])
            t0 = time.perf_counter()
            errs = pipeline(self.ctl, payloads, counts, check, self.tick)
            el = time.perf_counter() - t0
            if errs or bad[0]:
                raise RuntimeError(f"XDEL: {errs} errors, {bad[0]} replies other than 1")
            m = self.collect([cmd], len(cmds), el, min_calls=len(cmds))
            self.delete(tmp)
            return m

        self.guarded(wid, lambda: self.record(
            wid, f"XDEL of {cfg['xdel_n']:,} random IDs (one per call, pipeline 1000) on {big:,} entries",
            "speed", "us", self.interleave(wid, run_del), "delete"))

    # -- blocking ----------------------------------------------------------------------------
    def block_workload(self) -> None:
        wid = "xread-block"
        iters = self.cfg["block_iters"]
        skipped = ""
        probe_key = "xb:m:blockprobe"
        try:
            self.ctl.call("XS.ADD", probe_key, "*", "f", "1")
            self.ctl.call("XS.READ", "BLOCK", "1", "STREAMS", probe_key, "$")
        except RedisError as e:
            skipped = f"XS.READ BLOCK answers an error: {e}"
        self.delete(probe_key)
        arms = ("n", "a") if skipped else ARMS

        def run(arm, rep):
            key = f"xb:{arm}:blk"
            self.delete(key)
            self.ctl.call(C(arm, "XADD"), key, "*", "f", "0")
            reader, writer = Redis(self.port), Redis(self.port)
            rd = enc(C(arm, "XREAD"), "BLOCK", "0", "STREAMS", key, "$")
            wr = enc(C(arm, "XADD"), key, "*", "f", "1")
            lat = []
            for _ in range(iters):
                reader.send(rd)
                deadline = time.time() + 2
                while int(self.ctl.info("clients").get("blocked_clients", "0")) < 1:
                    if time.time() > deadline:
                        raise RuntimeError("the reader never blocked")
                t0 = time.perf_counter()
                writer.send(wr)
                r = reader.read_reply()
                t1 = time.perf_counter()
                w = writer.read_reply()
                if isinstance(r, RedisError) or isinstance(w, RedisError) or not r:
                    raise RuntimeError(f"blocking round: reader {r!r}, writer {w!r}")
                lat.append((t1 - t0) * 1e6)
            reader.close()
            writer.close()
            self.delete(key)
            lat.sort()
            return {"p50_us": lat[len(lat) // 2], "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                    "iters": iters}

        data = self.interleave(wid, run, arms=arms)
        note = "time from sending XADD on one connection to the blocked XREAD's reply on another"
        self.record("xread-block-p50", "XREAD BLOCK 0 wake-up latency p50", "speed", "us",
                    {a: [{"cmd_us": d["p50_us"]} for d in v] for a, v in data.items()}, "blocking",
                    metrics=("cmd_us",), note=note, skipped=skipped)
        self.record("xread-block-p99", "XREAD BLOCK 0 wake-up latency p99", "speed", "us",
                    {a: [{"cmd_us": d["p99_us"]} for d in v] for a, v in data.items()}, "blocking",
                    metrics=("cmd_us",), note=note, skipped=skipped)

    # -- persistence -------------------------------------------------------------------------
    def rdb_workloads(self) -> None:
        n = self.cfg["save_n"]
        ctl = self.ctl
        ctl.call("FLUSHALL")
        files = {}
        fill_s = {}
        for arm in ("n", "m"):
            log(f"  filling {n:,} entries ({ARM_LABEL[arm]}) ...")
            key = f"xb:{arm}:rdb"
            fill_s[arm] = self.fill(arm, key, n, "small")
            ctl.call("CONFIG", "SET", "dbfilename", f"{arm}.rdb")
            ctl.call("SAVE")
            files[arm] = os.path.join(self.srv.dir, f"{arm}.rdb")
            ctl.call("FLUSHALL")
        shutil.copyfile(files["n"], os.path.join(self.srv.dir, "a.rdb"))  # A/A: the same native data
        files["a"] = os.path.join(self.srv.dir, "a.rdb")
        base_mem = self.used_memory()

        def run(arm, rep):
            ctl.call("FLUSHALL")
            ctl.call("CONFIG", "SET", "dbfilename", f"{arm}.rdb")
            self.reset()
            t0 = time.perf_counter()
            ctl.call("DEBUG", "RELOAD", "NOSAVE")
            load_wall = time.perf_counter() - t0
            st = self.cmdstats()
            load_cmd = st.get("debug", (0, 0, 0))[1] / 1e3
            keys = ctl.call("DBSIZE")
            ln = ctl.call(C(arm, "XLEN"), f"xb:{'n' if arm == 'a' else arm}:rdb")
            if keys != 1 or ln != n:
                raise RuntimeError(f"after load: {keys} keys, length {ln}")
            mem = (self.used_memory() - base_mem) / n
            # The same load with sanitize-dump-payload yes: every element checked, on
            # both sides (the built-in deep-sanitizes its listpacks, the module walks
            # every node); the row above is the default (no: headers only, both sides).
            ctl.call("FLUSHALL")
            ctl.call("CONFIG", "SET", "sanitize-dump-payload", "yes")
            try:
                self.reset()
                t0 = time.perf_counter()
                ctl.call("DEBUG", "RELOAD", "NOSAVE")
                deep_wall = time.perf_counter() - t0
                deep_cmd = self.cmdstats().get("debug", (0, 0, 0))[1] / 1e3
            finally:
                ctl.call("CONFIG", "SET", "sanitize-dump-payload", "no")
            ln = ctl.call(C(arm, "XLEN"), f"xb:{'n' if arm == 'a' else arm}:rdb")
            if ln != n:
                raise RuntimeError(f"after the sanitized load: length {ln}")
            self.reset()
            t0 = time.perf_counter()
            ctl.call("SAVE")
            save_wall = time.perf_counter() - t0
            save_cmd = self.cmdstats().get("save", (0, 0, 0))[1] / 1e3
            size = os.path.getsize(files[arm])
            ctl.call("FLUSHALL")
            return {"load_ms": load_cmd, "load_wall_ms": load_wall * 1e3, "deep_load_ms": deep_cmd,
                    "deep_load_wall_ms": deep_wall * 1e3, "save_ms": save_cmd,
                    "save_wall_ms": save_wall * 1e3, "rdb_bytes": size, "loaded_bytes_per_entry": mem}

        data = self.interleave("rdb", run)
        pick = lambda k, k2=None: {a: [{"cmd_us": d[k], **({"client_ms": d[k2]} if k2 else {})} for d in v] for a, v in data.items()}
        self.record("rdb-load", f"RDB load time, {n:,} entries (DEBUG RELOAD NOSAVE into an empty db)", "speed", "ms",
                    pick("load_ms", "load_wall_ms"), "persistence", metrics=("cmd_us",),
                    note="the A/A arm loads a copy of the native RDB file; sanitize-dump-payload no (the default): "
                         "both sides check listpack headers only")
        self.record("rdb-load-sanitize", f"RDB load time with sanitize-dump-payload yes, {n:,} entries", "speed", "ms",
                    pick("deep_load_ms", "deep_load_wall_ms"), "persistence", metrics=("cmd_us",),
                    note="every element of every node checked on both sides")
        self.record("rdb-save", f"SAVE time, {n:,} entries (the stream alone in the db)", "speed", "ms",
                    pick("save_ms", "save_wall_ms"), "persistence", metrics=("cmd_us",))
        self.record("rdb-size", f"RDB file size per entry, {n:,} entries", "memory", "B",
                    {a: [{"bytes_per_entry": d["rdb_bytes"] / n} for d in v] for a, v in data.items()}, "persistence",
                    metrics=("bytes_per_entry",), note="informational (no target in issue 7)")
        self.record("mem-rdb-loaded", f"bytes per entry after loading {n:,} entries from RDB", "memory", "B",
                    {a: [{"bytes_per_entry": d["loaded_bytes_per_entry"]} for d in v] for a, v in data.items()},
                    "memory", metrics=("bytes_per_entry",), note="used_memory delta after DEBUG RELOAD")
        self.results[-1]["fill_s"] = fill_s
        ctl.call("CONFIG", "SET", "dbfilename", "dump.rdb")

    # ----------------------------------------------------------------------------------------
    def compaction_workloads(self) -> None:
        """Memory that comes back (issue 18): fill n entries, XDEL every other one (or 90% of them),
        and compare the used_memory delta of what is left with the built-in's (which frees nothing
        until whole nodes go). The module arm runs with xstream.compact-deleted 50 (rewritten at
        the XDEL that crosses the threshold); the figures are deterministic, one rep suffices."""
        cfg = self.cfg
        sizes = [cfg["mid"]] + ([cfg["big"]] if cfg["big"] != cfg["mid"] else [])
        for n in sizes:
            for what, keep in (("half", lambda i: i % 2 == 1), ("90pct", lambda i: i % 10 == 9)):
                label = f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}M"
                wid = f"mem-xdel-{what}-{label}"
                if not self.wanted(wid):
                    continue
                log(f"{wid} ...")
                data = {}
                for arm in ARMS:
                    key = f"xb:{arm}:xdelmem"
                    self.delete(key)
                    if arm == "m":
                        self.ctl.call("CONFIG", "SET", "xstream.compact-deleted", "50")
                    before = self.used_memory()
                    self.fill(arm, key, n, "small")
                    full = self.used_memory()
                    cmd = C(arm, "XDEL").encode()
                    kb = key.encode()
                    conn = Redis(self.port)
                    try:
                        dels = [i for i in range(n) if not keep(i)]
                        for lo in range(0, len(dels), 10_000):
                            part = dels[lo:lo + 10_000]
                            conn.send(b"".join(enc(cmd, kb, sid(i)) for i in part))
                            data_ = conn.read_bytes(4 * len(part))  # :1\r\n each
                            if data_.count(b":1\r\n") != len(part):
                                raise RuntimeError(f"{wid}: XDEL replies {data_[:100]!r}")
                    finally:
                        conn.close()
                    after = self.used_memory()
                    left = int(self.ctl.call(C(arm, "XLEN"), key))
                    data[arm] = [{"bytes": after - before, "bytes_full": full - before, "len": left}]
                    if arm == "m":
                        self.ctl.call("CONFIG", "SET", "xstream.compact-deleted", "-1")
                    self.delete(key)
                desc = "every other entry" if what == "half" else "9 entries of 10"
                self.record(wid, f"used memory after XDEL of {desc}, {n:,} entries (module: compact-deleted 50)",
                            "memory", "B", data, "memory", metrics=("bytes",),
                            note="used_memory delta (before the fill -> after the XDELs)")

    # ----------------------------------------------------------------------------------------
    def compression_workloads(self) -> None:
        """Compressed nodes (issues 18 and 29): the same JSON events (bench/compression.py's,
        ~200 bytes, fixed seed) in a built-in stream on the native arms and in a module stream
        stored with `xstream.compression lz4` / `zstd` on the module arm, the decoded-node cache
        at its default (`xstream.compression-cache 1mb`). Rows: bytes per entry; XRANGE from a
        random ID COUNT 100 (each call decodes about 6 nodes, mostly not in the cache: a random
        start in a stream larger than the cache); XRANGE COUNT 10 walking the stream in order
        (a consumer catching up: each node is decoded once, the cache serves the rest)."""
        import compression  # bench/compression.py: the event generator and its fill
        cfg = self.cfg
        n = cfg["json_n"]
        calls = cfg["json_calls"]
        rng = random.Random(7)
        starts = [rng.randrange(1, n) for _ in range(calls)]
        for arm in ("n", "a"):
            self.delete(f"xb:{arm}:json")
        for codec in ("lz4", "zstd"):
            mem_wid, rand_wid, walk_wid = f"mem-json-{codec}", f"xrange-100-json-{codec}", f"xrange-walk-json-{codec}"
            if not (self.wanted(mem_wid) or self.wanted(rand_wid) or self.wanted(walk_wid)):
                continue
            log(f"compressed streams ({codec}, {n:,} JSON events per arm) ...")
            data = {}
            for arm in ARMS:
                key = f"xb:{arm}:json" + (f":{codec}" if arm == "m" else "")
                if arm != "m" and self.ctl.call("EXISTS", key) == 1:
                    data[arm] = [{"bytes_per_entry": self._json_bytes[arm]}]
                    continue
                self.delete(key)
                if arm == "m":
                    self.ctl.call("CONFIG", "SET", "xstream.compression", codec)
                before = self.used_memory()
                try:
                    compression.fill(self.port, C(arm, "XADD"), key, n)
                    if arm == "m":
                        t0 = time.time()
                        while int(self.ctl.info("xstream").get("xstream_compression_queued_keys", 0)) != 0:
                            if time.time() - t0 > 60:
                                raise RuntimeError("the background step never compressed the sealed nodes")
                            time.sleep(0.05)
                finally:
                    self.ctl.call("CONFIG", "SET", "xstream.compression", "off")
                bpe = (self.used_memory() - before) / n
                if arm != "m":
                    self._json_bytes = getattr(self, "_json_bytes", {})
                    self._json_bytes[arm] = bpe
                data[arm] = [{"bytes_per_entry": bpe}]
            if self.wanted(mem_wid):
                self.record(mem_wid, f"bytes per entry, {n:,} JSON events of ~200 bytes (module: compression {codec})",
                            "memory", "B", data, "memory", metrics=("bytes_per_entry",),
                            note="used_memory delta ÷ entries, once every sealed node is compressed")

            def key_of(arm, codec=codec):
                return f"xb:{arm}:json" + (f":{codec}" if arm == "m" else "")

            def run_calls(arm, payload_starts, count):
                cmdname = C(arm, "XRANGE")
                key = key_of(arm)
                cmds = [enc(cmdname, key, b"%d-0" % s, "+", "COUNT", count) for s in payload_starts]
                payloads, counts = batched(cmds, 100)
                self.reset([cmdname])
                t0 = time.perf_counter()
                errs = pipeline(self.ctl, payloads, counts, None, self.tick)
                el = time.perf_counter() - t0
                if errs:
                    raise RuntimeError(f"{errs} errors")
                return self.collect([cmdname], len(cmds), el, min_calls=len(cmds))

            if self.wanted(rand_wid):
                self.guarded(rand_wid, lambda: self.record(
                    rand_wid, f"XRANGE <random id> + COUNT 100 on {n:,} JSON events (module: compression {codec}), "
                    "1 client, pipeline 100", "speed", "us",
                    self.interleave(rand_wid, lambda arm, rep: run_calls(arm, starts, "100")), "compression"))
            if self.wanted(walk_wid):
                walk = calls // 2

                def run_walk(arm, rep):
                    first = 1 + (rep * walk * 10) % max(1, n - walk * 10)
                    return run_calls(arm, [first + 10 * k for k in range(walk)], "10")

                self.guarded(walk_wid, lambda: self.record(
                    walk_wid, f"XRANGE <id> + COUNT 10 over {walk * 10:,} consecutive JSON events, in order "
                    f"(module: compression {codec}), 1 client, pipeline 100", "speed", "us",
                    self.interleave(walk_wid, run_walk), "compression"))
            self.delete(key_of("m"))
        for arm in ("n", "a"):
            self.delete(f"xb:{arm}:json")

    def warm_commands(self) -> None:
        """Runs once, on every arm, each command the memory workloads measure, so that what the
        server allocates for a command on its first call stays out of every used_memory delta:
        Redis 7's latency tracking (latency-tracking yes, the default) gives each command a
        histogram of ~24 KB on first use (measured: the first XLEN on a fresh server adds 24,688
        bytes, the second none). Without this, whichever arm first calls XADD or XS.ADD pays it
        in its first memory row: 0.25 byte per entry of a 100,000-entry fill."""
        for arm in ARMS:
            key = f"xb:{arm}:warm"
            self.delete(key)
            for cmd in ([C(arm, "XADD"), key, "1-1", "f", "v"],
                        [C(arm, "XGROUP"), "CREATE", key, "g", "0"],
                        [C(arm, "XREADGROUP"), "GROUP", "g", "c", "COUNT", "1", "STREAMS", key, ">"],
                        [C(arm, "XPENDING"), key, "g"],
                        [C(arm, "XLEN"), key]):
                self.ctl.call(*cmd)
            self.delete(key)

    # ----------------------------------------------------------------------------------------
    def run_all(self) -> None:
        self.warm_commands()
        self.setup_streams()
        self.xadd_workloads()
        if self.touches("xrange", "xrevrange"):
            self.range_workloads()
        if self.touches("xreadgroup"):
            self.group_workloads()
        if self.touches("mem-small"):
            self.guarded("mem-small-stream", self.small_streams_workload, force=True)
        if self.touches("xpending", "xautoclaim", "mem-pending"):
            self.guarded("mem-pending", self.pending_setup, force=True)
            self.pel_workloads()
        if self.touches("xtrim", "xdel"):
            self.delete_workloads()
        if self.touches("mem-xdel"):
            self.compaction_workloads()
        if self.touches("json"):
            self.compression_workloads()
        self.guarded("xread-block", self.block_workload)
        if self.touches("rdb-load", "rdb-save", "rdb-size", "mem-rdb-loaded", "rdb-load-sanitize"):
            self.guarded("rdb", self.rdb_workloads, force=True)


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(row: dict) -> dict:
    runs = row["runs"]
    kind = row["kind"]
    if not runs or "n" not in runs:
        return {}
    main = row["metrics"][0] if row["metrics"] else None
    s = {}

    def per_rep_ratio(metric, other, higher_better):
        if other not in runs or not runs[other]:
            return None, []
        rs = []
        for x, y in zip(runs["n"], runs[other]):
            a, b = x.get(metric), y.get(metric)
            if a is None or b is None or a == 0 or b == 0:
                continue
            rs.append(b / a if higher_better else a / b)
        return (med(rs), rs)

    if kind == "speed":
        s["n"] = med([d.get(main) for d in runs["n"]])
        s["m"] = med([d.get(main) for d in runs.get("m", [])])
        s["a"] = med([d.get(main) for d in runs.get("a", [])])
        s["ratio"], s["ratio_reps"] = per_rep_ratio(main, "m", False)
        s["aa"], s["aa_reps"] = per_rep_ratio(main, "a", False)
        if "proc_us" in row["metrics"]:
            s["proc_ratio"], _ = per_rep_ratio("proc_us", "m", False)
            s["proc_aa"], _ = per_rep_ratio("proc_us", "a", False)
        if "client_ops" in row["metrics"]:
            s["client_ratio"], _ = per_rep_ratio("client_ops", "m", True)
            s["client_aa"], _ = per_rep_ratio("client_ops", "a", True)
            s["n_client"] = med([d.get("client_ops") for d in runs["n"]])
            s["m_client"] = med([d.get("client_ops") for d in runs.get("m", [])])
    elif kind == "memory":
        s["n"] = med([d.get(main) for d in runs["n"]])
        s["m"] = med([d.get(main) for d in runs.get("m", [])])
        s["a"] = med([d.get(main) for d in runs.get("a", [])])
        # memory ratio = module / native (lower is better)
        s["ratio"], s["ratio_reps"] = per_rep_ratio(main, "m", True)
        s["aa"], s["aa_reps"] = per_rep_ratio(main, "a", True)
        if "memory_usage_per_entry" in row["metrics"]:
            s["n_mu"] = med([d.get("memory_usage_per_entry") for d in runs["n"]])
            s["m_mu"] = med([d.get("memory_usage_per_entry") for d in runs.get("m", [])])
            s["mu_ratio"], _ = per_rep_ratio("memory_usage_per_entry", "m", True)
    if row["id"] == "rdb-size":
        kind = "info"
    op, tv = TARGETS.get("info" if row["id"] in ("rdb-size",) else kind, (None, None))
    s["target"] = None if op is None else f"{'≥' if op == '>=' else '≤'} {tv:.2f}"
    r = s.get("ratio")
    # This workload's noise: how far its A/A ratio strays from 1, as the median ratio or as the
    # typical single rep, whichever is larger.
    aa_reps = s.get("aa_reps") or []
    noise = max(abs(s["aa"] - 1) if s.get("aa") else 0.0,
                med([abs(x - 1) for x in aa_reps]) or 0.0)
    s["noise"] = noise
    if r is None or op is None:
        s["verdict"] = "—" if op is None else "skipped"
    elif (op == ">=" and r >= tv) or (op == "<=" and r <= tv):
        s["verdict"] = "met"
    elif abs(r - tv) <= max(noise, 0.0):
        s["verdict"] = "within noise"
    else:
        s["verdict"] = "missed"
    # The arms' medians on the other side of the target than the median per-rep ratio: the reps
    # disagree too much for a verdict (XPENDING sweep, 2026-12-05: 1.34 from per-rep ratios of
    # 0.77-1.36, while the arms' medians were 20.1 against 25.7 µs).
    if s["verdict"] == "met" and s.get("n") and s.get("m") and kind in ("speed", "memory"):
        arms = s["n"] / s["m"] if kind == "speed" else s["m"] / s["n"]
        if not ((op == ">=" and arms >= tv) or (op == "<=" and arms <= tv)):
            s["verdict"] = "within noise"
    return s


def fmt_ratio(r) -> str:
    if r is None:
        return "—"
    if f"{r:.2f}" == "1.00" and abs(r - 1) >= 0.0005:
        return f"{r:.3f}"  # 0.998 or 1.004: show which side of the target it is on
    return f"{r:.2f}"


def fmt_val(v, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "us":
        return f"{v:.2f} µs" if v < 100 else f"{v:.0f} µs"
    if unit == "ms":
        return f"{v:.1f} ms" if v < 100 else f"{v:.0f} ms"
    if unit == "B":
        return f"{v:.1f} B"
    return f"{v:.3g}"


def fmt_rate(v) -> str:
    if v is None:
        return "—"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M/s"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k/s"
    return f"{v:.1f}/s"


# --------------------------------------------------------------------------------------------
# Machine description
# --------------------------------------------------------------------------------------------


def machine_info(module_path: str) -> dict:
    info = {"python": platform.python_version(), "kernel": platform.release(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    try:
        info["redis"] = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"],
                               capture_output=True, text=True).stdout.strip()
        info["module_commit"] = head + ("+dirty" if dirty else "")
    except OSError:
        pass
    info["module_sha256"] = hashlib.sha256(open(module_path, "rb").read()).hexdigest()[:16]
    info["loadavg_start"] = os.getloadavg()
    return info


# --------------------------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------------------------

GREEN, AMBER, RED, GREY = "#2e8b57", "#e0a030", "#c8453b", "#888888"


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_ratio_chart(title: str, subtitle: str, rows: list[tuple], floor: float | None) -> str:
    """rows: (label, ratio, aa_ratio, verdict). Diverging bars on a log2 axis around 1.0."""
    rows = [r for r in rows if r[1] is not None]
    W, label_w, right_pad = 980, 390, 70
    top, row_h = 70, 26
    H = top + row_h * max(1, len(rows)) + 66
    vals = [r[1] for r in rows] + [r[2] for r in rows if r[2]] + [0.5, 2.0]
    lo = min(vals)
    hi = max(vals)
    lo2 = math.floor(math.log2(max(lo, 1 / 64)) * 2) / 2
    hi2 = math.ceil(math.log2(min(hi, 64)) * 2) / 2
    x0, x1 = label_w, W - right_pad

    def X(v):
        v = min(max(v, 2 ** lo2), 2 ** hi2)
        return x0 + (math.log2(v) - lo2) / (hi2 - lo2) * (x1 - x0)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="13">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="12" y="24" font-size="17" font-weight="bold">{_esc(title)}</text>',
           f'<text x="12" y="44" fill="#444">{_esc(subtitle)}</text>']
    if floor:
        fx0, fx1 = X(1 / (1 + floor)), X(1 + floor)
        out.append(f'<rect x="{fx0:.1f}" y="{top - 6}" width="{fx1 - fx0:.1f}" height="{row_h * len(rows) + 6}" '
                   f'fill="#e8e8e8"/>')
    ticks = [t for t in (1 / 32, 1 / 16, 0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 4, 8, 16, 32)
             if lo2 <= math.log2(t) <= hi2]
    for t in ticks:
        x = X(t)
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{top + row_h * len(rows)}" stroke="#ddd"/>')
        lab = f"{t:g}" if t >= 0.125 else f"1/{round(1 / t)}"
        out.append(f'<text x="{x:.1f}" y="{top + row_h * len(rows) + 18}" text-anchor="middle" fill="#444">{lab}×</text>')
    for i, (label, r, aa, verdict) in enumerate(rows):
        y = top + i * row_h
        color = GREEN if verdict == "met" else AMBER if verdict == "within noise" else RED if verdict == "missed" else GREY
        xa, xb = sorted((X(1.0), X(r)))
        out.append(f'<text x="{label_w - 10}" y="{y + 17}" text-anchor="end">{_esc(label)}</text>')
        out.append(f'<rect x="{xa:.1f}" y="{y + 4}" width="{max(xb - xa, 1.5):.1f}" height="{row_h - 8}" fill="{color}"/>')
        tx = X(r) + (6 if r >= 1 else -6)
        anchor = "start" if r >= 1 else "end"
        out.append(f'<text x="{tx:.1f}" y="{y + 17}" text-anchor="{anchor}" font-weight="bold">{r:.2f}</text>')
        if aa:
            xm = X(aa)
            out.append(f'<path d="M{xm:.1f},{y + 6} l4,7 l-4,7 l-4,-7 z" fill="#333" opacity="0.7"/>')
    x1line = X(1.0)
    out.append(f'<line x1="{x1line:.1f}" y1="{top - 10}" x2="{x1line:.1f}" y2="{top + row_h * len(rows) + 4}" '
               f'stroke="black" stroke-width="2"/>')
    ly = H - 12
    out.append(f'<rect x="12" y="{ly - 10}" width="12" height="12" fill="{GREEN}"/><text x="30" y="{ly}">target met</text>')
    out.append(f'<rect x="122" y="{ly - 10}" width="12" height="12" fill="{AMBER}"/><text x="140" y="{ly}">short, within A/A noise</text>')
    out.append(f'<rect x="318" y="{ly - 10}" width="12" height="12" fill="{RED}"/><text x="336" y="{ly}">missed</text>')
    out.append(f'<path d="M418,{ly - 11} l4,7 l-4,7 l-4,-7 z" fill="#333" opacity="0.7"/><text x="428" y="{ly}">A/A ratio (native vs native)</text>')
    if floor:
        out.append(f'<rect x="640" y="{ly - 10}" width="12" height="12" fill="#e8e8e8" stroke="#ccc"/>'
                   f'<text x="658" y="{ly}">median A/A noise band (±{floor * 100:.0f}%)</text>')
    out.append("</svg>")
    return "\n".join(out)


def svg_memory_chart(title: str, subtitle: str, rows: list[tuple]) -> str:
    """rows: (label, native, module, verdict) -> grouped horizontal bars, bytes."""
    rows = [r for r in rows if r[1] is not None and r[2] is not None]
    W, label_w, right_pad = 980, 300, 250
    top, group_h = 70, 46
    H = top + group_h * max(1, len(rows)) + 40
    vmax = max([max(r[1], r[2]) for r in rows] + [1])
    x0, x1 = label_w, W - right_pad

    def X(v):
        return x0 + v / vmax * (x1 - x0)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'font-family="DejaVu Sans, Arial, sans-serif" font-size="13">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="12" y="24" font-size="17" font-weight="bold">{_esc(title)}</text>',
           f'<text x="12" y="44" fill="#444">{_esc(subtitle)}</text>']
    for i, (label, nv, mv, verdict) in enumerate(rows):
        y = top + i * group_h
        color = GREEN if verdict == "met" else AMBER if verdict == "within noise" else RED if verdict == "missed" else GREY
        out.append(f'<text x="{label_w - 10}" y="{y + 24}" text-anchor="end">{_esc(label)}</text>')
        out.append(f'<rect x="{x0}" y="{y + 2}" width="{X(nv) - x0:.1f}" height="17" fill="#7a8fa6"/>')
        out.append(f'<text x="{X(nv) + 5:.1f}" y="{y + 15}" fill="#333">{nv:.1f} B native</text>')
        out.append(f'<rect x="{x0}" y="{y + 21}" width="{X(mv) - x0:.1f}" height="17" fill="{color}"/>')
        ratio = mv / nv if nv else float("nan")
        out.append(f'<text x="{X(mv) + 5:.1f}" y="{y + 34}" font-weight="bold">{mv:.1f} B module ({ratio:.2f}×)</text>')
    ly = H - 12
    out.append(f'<rect x="12" y="{ly - 10}" width="12" height="12" fill="#7a8fa6"/><text x="30" y="{ly}">native</text>')
    out.append(f'<rect x="100" y="{ly - 10}" width="12" height="12" fill="{GREEN}"/><text x="118" y="{ly}">module, ≤ 1.00× native</text>')
    out.append(f'<rect x="300" y="{ly - 10}" width="12" height="12" fill="{RED}"/><text x="318" y="{ly}">module, above native</text>')
    out.append("</svg>")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def noise_floor(results: list[dict]) -> dict:
    devs = [abs(r["summary"]["aa"] - 1) for r in results
            if r["kind"] == "speed" and r["summary"].get("aa")]
    cdevs = [abs(r["summary"]["client_aa"] - 1) for r in results
             if r["kind"] == "speed" and r["summary"].get("client_aa")]
    pdevs = [abs(r["summary"]["proc_aa"] - 1) for r in results
             if r["kind"] == "speed" and r["summary"].get("proc_aa")]
    return {
        "proc_median": med(pdevs), "proc_max": max(pdevs) if pdevs else None,
        "cmd_median": med(devs), "cmd_max": max(devs) if devs else None,
        "client_median": med(cdevs), "client_max": max(cdevs) if cdevs else None,
    }


def short_label(r: dict) -> str:
    return {
        "xadd-1f-p1": "XADD 1 field, 50 clients",
        "xadd-64b-p1": "XADD 64-byte value, 50 clients",
        "xadd-5f-p1": "XADD 5 fields, 50 clients",
        "xadd-1f-p16": "XADD 1 field, pipeline 16",
        "xadd-64b-p16": "XADD 64-byte value, pipeline 16",
        "xadd-5f-p16": "XADD 5 fields, pipeline 16",
        "xadd-maxlen-approx": "XADD MAXLEN ~ 1000",
        "xadd-maxlen-exact": "XADD MAXLEN = 1000",
        "xrange-10": "XRANGE COUNT 10",
        "xrange-100": "XRANGE COUNT 100",
        "xrevrange-10": "XREVRANGE COUNT 10",
        "xrange-point": "XRANGE id id (point lookup)",
        "xreadgroup-1c": "XREADGROUP+XACK, 1 consumer",
        "xreadgroup-4c": "XREADGROUP+XACK, 4 consumers",
        "xpending-summary": "XPENDING summary",
        "xpending-sweep": "XPENDING COUNT 100 sweep",
        "xautoclaim-sweep": "XAUTOCLAIM COUNT 100 sweep",
        "xtrim-half": "XTRIM half of the big stream",
        "xtrim-maxlen-half-big": "XTRIM MAXLEN = half, big stream",
        "xtrim-minid-half-big": "XTRIM MINID = half, big stream",
        "xtrim-maxlen-half-sensor": "XTRIM MAXLEN = half, sensor stream",
        "xtrim-minid-half-sensor": "XTRIM MINID = half, sensor stream",
        "xdel-10k": "XDEL 10k random IDs",
        "xread-block-p50": "XREAD BLOCK wake-up p50",
        "xread-block-p99": "XREAD BLOCK wake-up p99",
        "rdb-load": "RDB load",
        "rdb-load-sanitize": "RDB load, sanitize-dump-payload yes",
        "rdb-save": "SAVE",
        "rdb-size": "RDB size",
        "mem-pending": "bytes per pending entry",
        "mem-small-stream": "bytes per stream of one entry",
        "mem-small-group": "bytes per stream for a group, a consumer, one pending",
        "mem-rdb-loaded": "bytes per entry after RDB load",
        "mem-json-lz4": "bytes per entry, JSON events, lz4",
        "mem-json-zstd": "bytes per entry, JSON events, zstd",
        "xrange-100-json-lz4": "XRANGE COUNT 100, JSON, lz4",
        "xrange-100-json-zstd": "XRANGE COUNT 100, JSON, zstd",
        "xrange-walk-json-lz4": "XRANGE COUNT 10 in order, JSON, lz4",
        "xrange-walk-json-zstd": "XRANGE COUNT 10 in order, JSON, zstd",
    }.get(r["id"], r["id"].replace("mem-", "bytes per entry, ").replace("-small", ", small value")
                   .replace("-64b", ", 64-byte value")
                   .replace("-sensor", ", sensor readings").replace("-1ms", ", one per ms").replace("-5f", ", 5 fields"))


def human(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def mem_label(r: dict, cfg: dict) -> str:
    wid = r["id"]
    if wid == "mem-pending":
        return f"per pending entry ({human(cfg['mid'])} pending)"
    if wid == "mem-small-stream":
        return f"per stream of one entry ({human(SMALL_STREAMS)} streams)"
    if wid == "mem-small-group":
        return f"per stream: group + consumer + 1 pending ({human(SMALL_STREAMS)})"
    if wid == "rdb-size":
        return f"RDB file per entry ({human(cfg['save_n'])} entries)"
    if wid == "mem-rdb-loaded":
        return f"per entry, {human(cfg['save_n'])} loaded from RDB"
    parts = wid.split("-")  # mem-100k-small, mem-1M-sensor, mem-100k-xdel-half...
    if len(parts) == 3 and parts[2] in MEM_KINDS:
        return f"per entry, {parts[1]} entries, {MEM_KINDS[parts[2]]}"
    return short_label(r)


# What the last part of a memory workload's id means (the chart labels say it as the table).
MEM_KINDS = {"small": "small value", "64b": "64-byte value", "sensor": "sensor readings", "1ms": "one per ms",
             "5f": "5 fields"}


def latest_results(mode: str):
    """(doc, path relative to ROOT) of the newest complete run of a mode in bench/results, or None."""
    if not os.path.isdir(RESULTS_DIR):
        return None
    names = sorted(n for n in os.listdir(RESULTS_DIR)
                   if n.endswith(".json") and "partial" not in n
                   and (n.endswith("-quick.json") if mode == "quick" else n[:15].replace("-", "").isdigit() and len(n) == 20))
    if not names:
        return None
    path = os.path.join(RESULTS_DIR, names[-1])
    with open(path) as f:
        return json.load(f), os.path.relpath(path, ROOT)


def regenerate_docs() -> bool:
    """docs/BENCHMARKS.md and the SVGs from the newest full run (the newest quick run if there is no
    full one), plus the newest quick run's ratios when it is newer than that full run."""
    full, quick = latest_results("full"), latest_results("quick")
    main = full or quick
    if main is None:
        return False
    extra = quick if (full and quick and quick[0]["started"] > full[0]["started"]) else None
    for doc, _ in filter(None, (main, extra)):
        for r in doc["results"]:
            if r.get("runs"):
                r["summary"] = summarize(r)  # with the current rules
        doc["noise_floor"] = noise_floor(doc["results"])
    write_report(main[0], main[1], extra)
    return True


def write_report(doc: dict, json_rel: str, quick=None) -> None:
    results = doc["results"]
    floor = doc["noise_floor"]
    os.makedirs(SVG_DIR, exist_ok=True)
    speed = [r for r in results if r["kind"] == "speed" and r["summary"].get("ratio")]
    fl = floor.get("cmd_median")
    svg = svg_ratio_chart(
        "xstream vs built-in streams: speed ratio (server time inside the command)",
        f"native ÷ module time per operation, median of {doc['config']['reps']} interleaved reps; right of 1.0 = module faster "
        f"({doc['mode']} run, {doc['started']})",
        [(short_label(r), r["summary"]["ratio"], r["summary"].get("aa"), r["summary"]["verdict"]) for r in speed], fl)
    with open(os.path.join(SVG_DIR, "ratios.svg"), "w") as f:
        f.write(svg)
    crow = [r for r in speed if r["summary"].get("client_ratio")]
    svg = svg_ratio_chart(
        "xstream vs built-in streams: client-side throughput ratio",
        "module ops/s ÷ native ops/s as the client saw it (noisier: client and server share 2 cores); right of 1.0 = module faster",
        [(short_label(r), r["summary"]["client_ratio"], r["summary"].get("client_aa"),
          "met" if r["summary"]["client_ratio"] >= 1 else
          "within noise" if abs(r["summary"]["client_ratio"] - 1) <= abs((r["summary"].get("client_aa") or 1) - 1) else "missed")
         for r in crow], floor.get("client_median"))
    with open(os.path.join(SVG_DIR, "ratios_client.svg"), "w") as f:
        f.write(svg)
    mem = [r for r in results if r["kind"] == "memory" and r["summary"].get("ratio")]
    svg = svg_memory_chart(
        "Memory: bytes per entry (lower is better)",
        "INFO used_memory delta ÷ entries (RDB row: file size ÷ entries); green = module at most native",
        [(mem_label(r, doc["config"]), r["summary"]["n"], r["summary"]["m"], r["summary"]["verdict"] if r["id"] != "rdb-size" else
          ("met" if r["summary"]["m"] <= r["summary"]["n"] else "missed")) for r in mem])
    with open(os.path.join(SVG_DIR, "memory.svg"), "w") as f:
        f.write(svg)

    m = doc["machine"]
    L = []
    L.append("# Benchmarks: xstream vs the built-in streams")
    L.append("")
    L.append("<!-- Generated by bench/xbench.py; edit the generator (or bench/analysis.md), not this file. -->")
    L.append("")
    L.append("## How to run")
    L.append("")
    L.append("```sh")
    L.append("make bench-quick   # builds the module, ~2-3 minutes, smaller streams, 3 reps")
    L.append("make bench         # builds the module, full sizes (1M / 5M entries), 5 reps, ~8-15 minutes")
    L.append("python3 bench/xbench.py --only xrange,xdel   # some workloads only (does not rewrite this page)")
    L.append("```")
    L.append("")
    L.append("Both start one `redis-server` on a free port (never 6379) in a temporary directory, with a private copy of "
             "`target/dist/libxstream.so` (`make build`) loaded, and stop it at the end. Results go to `bench/results/<timestamp>.json`; "
             "this page and `docs/bench/*.svg` are regenerated from them.")
    L.append("")
    L.append("Method:")
    L.append("")
    L.append("- Every workload runs on three arms on the same server: **native** (`X*` on keys `xb:n:*`), **module** "
             "(`XS.*` on keys `xb:m:*`) and **native A/A** (`X*` again on keys `xb:a:*`). Reps alternate the order "
             "(n m a, a m n, ...), so a machine that gets slower or faster during the run hits every arm alike.")
    L.append("- Each run starts with `CONFIG RESETSTAT`. The headline cost is the server time inside the command from "
             "`INFO commandstats` (usec ÷ operations): what the command itself costs, whatever the client or the other "
             "work on the machine does. Also recorded: the server main thread's CPU time from `INFO cpu` (includes "
             "parsing and socket I/O) and the client-side throughput.")
    L.append("- Speed ratio = native cost ÷ module cost (= module throughput ÷ native throughput): **≥ 1.00 means the module "
             "is at least as fast**. Memory ratio = module bytes ÷ native bytes: **≤ 1.00 means at least as lean**. Each "
             "ratio is the median of the per-rep ratios; values are medians over reps.")
    L.append("- The A/A column is the same ratio for native vs native on other keys: how far from 1.00 pure noise gets. "
             "A miss smaller than that workload's A/A deviation (of the median, or of a typical single rep, whichever "
             "is larger) is marked *within noise*.")
    L.append("- Streams used by the read, delete and memory workloads are filled with pipelined `XADD`s with explicit IDs "
             f"(`<{BASE_MS} + i/{PER_MS}>-<i mod {PER_MS}>`, ten entries per millisecond, one field `f`; the value is the "
             "decimal entry number, or a 64-byte hex string), identical on every arm. The XADD workloads use `*` IDs "
             "through `redis-benchmark`.")
    L.append("")
    L.append("## Latest run")
    L.append("")
    L.append(f"- {doc['mode']} run, started {doc['started']}, {doc['duration_s'] / 60:.1f} minutes, {doc['config']['reps']} reps; "
             f"raw data: `{json_rel}`")
    L.append(f"- Machine: {m.get('cpu', '?')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, Linux {m.get('kernel')}; "
             f"load average at start {', '.join(f'{x:.2f}' for x in m.get('loadavg_start', []))}, "
             f"at end {', '.join(f'{x:.2f}' for x in m.get('loadavg_end', []))} (the machine is shared: "
             "that is why only same-run ratios are reported)")
    L.append(f"- {m.get('redis', 'redis-server ?')}; module at commit {m.get('module_commit', '?')} (sha256 of the .so "
             f"{m.get('module_sha256', '?')})")
    if doc.get("server_nice"):
        L.append(f"- redis-server ran at nice {doc['server_nice']} (the default when run as root), so that the other "
                 "work on the machine preempts it less often in mid-command; the client (redis-benchmark or this "
                 "script) ran at normal priority")
    L.append(f"- Sizes: big stream {doc['config']['big']:,} entries, PEL stream {doc['config']['mid']:,}, RDB stream "
             f"{doc['config']['save_n']:,}")
    L.append("")
    L.append("![speed ratios](bench/ratios.svg)")
    L.append("")
    L.append("![memory per entry](bench/memory.svg)")
    L.append("")
    L.append("![client-side ratios](bench/ratios_client.svg)")
    L.append("")
    L.append("## Results")
    L.append("")
    L.append("| workload | native | module | ratio | A/A | proc-CPU ratio | client ratio | target | met? |")
    mark = {"met": "✅ met", "missed": "❌ missed", "within noise": "≈ within noise", "skipped": "skipped", "—": "—"}
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        s = r["summary"]
        if r.get("skipped") and not s.get("ratio"):
            L.append(f"| {_md(r['title'])} | {fmt_val(s.get('n'), r['unit']) if s else '—'} | — | — | "
                     f"{fmt_ratio(s.get('aa')) if s else '—'} | — | — | {s.get('target') or '—'} | skipped: {_md(r['skipped'])} |")
            continue
        nval = fmt_val(s.get("n"), r["unit"])
        mval = fmt_val(s.get("m"), r["unit"])
        if s.get("n_client"):
            nval += f"<br>{fmt_rate(s['n_client'])}"
            mval += f"<br>{fmt_rate(s['m_client'])}"
        if s.get("n_mu") is not None:
            nval += f"<br>(MEMORY USAGE {s['n_mu']:.1f})"
            mval += f"<br>(MEMORY USAGE {s['m_mu']:.1f})"
        L.append(f"| {_md(r['title'])} | {nval} | {mval} | **{fmt_ratio(s.get('ratio'))}** | {fmt_ratio(s.get('aa'))} | "
                 f"{fmt_ratio(s.get('proc_ratio'))} | {fmt_ratio(s.get('client_ratio'))} | {s.get('target') or '—'} | "
                 f"{mark.get(s.get('verdict'), s.get('verdict'))} |")
    L.append("")
    L.append("Values: server time inside the command per operation (µs or ms; for the blocking rows, the client-measured "
             "latency), then the client-side rate. Notes per workload:")
    L.append("")
    notes: dict[str, list[str]] = {}
    for r in results:
        if r.get("note"):
            notes.setdefault(r["note"], []).append(short_label(r))
    for note, labels in notes.items():
        L.append(f"- {_md('; '.join(labels))}: {_md(note)}")
    L.append("")
    L.append("## A/A noise floor")
    L.append("")
    if floor.get("cmd_median") is not None:
        L.append(f"Native against native on other keys, same run: the command-time ratio strays from 1.00 by "
                 f"{floor['cmd_median'] * 100:.1f}% at the median workload and {floor['cmd_max'] * 100:.1f}% at most; "
                 + (f"the process-CPU ratio by {floor['proc_median'] * 100:.1f}% (median) and {floor['proc_max'] * 100:.1f}% (max); "
                    if floor.get("proc_median") is not None else "")
                 + f"the client-side ratio by {floor['client_median'] * 100:.1f}% (median) and {floor['client_max'] * 100:.1f}% (max). "
                 "Differences smaller than that are not evidence either way; the A/A column gives each workload's own.")
    L.append("")
    if quick:
        qd, qpath = quick
        L.append(f"## Latest quick run ({qd['started']}, `{qpath}`)")
        L.append("")
        L.append("Smaller sizes and fewer reps than the run above; speed ratios are native ÷ module cost, memory "
                 "ratios module ÷ native bytes.")
        L.append("")
        L.append("| workload | ratio | A/A | met? |")
        L.append("|---|---:|---:|---|")
        for r in qd["results"]:
            sq = r.get("summary") or {}
            L.append(f"| {_md(short_label(r))} | {fmt_ratio(sq.get('ratio'))} | {fmt_ratio(sq.get('aa'))} | "
                     f"{mark.get(sq.get('verdict'), sq.get('verdict') or _md(r.get('skipped', '')))} |")
        L.append("")
    counts = {}
    for r in results:
        v = r["summary"].get("verdict") if r["summary"] else None
        if v:
            counts[v] = counts.get(v, 0) + 1
    L.append("## Targets (issue 7)")
    L.append("")
    L.append("Throughput on every workload ≥ 1.00; memory per entry and per pending entry ≤ 1.00 (stretch 0.80); RDB load "
             "time ≤ 1.00 (here as a speed ratio: ≥ 1.00); blocking wake-up p99 ≤ 1.00 (speed ratio ≥ 1.00).")
    L.append("")
    L.append("This run: " + ", ".join(f"{'informational' if v == '—' else v}: {c}" for v, c in sorted(counts.items())) + ".")
    for verdict, head in (("missed", "Missed"), ("within noise", "Within the A/A noise (short of the target, or reps that disagree)"),
                          ("met", "Met")):
        rows = [r for r in results if r["summary"].get("verdict") == verdict]
        if rows:
            L.append("")
            L.append(f"{head}: " + "; ".join(f"{short_label(r)} ({fmt_ratio(r['summary']['ratio'])})" for r in rows) + ".")
    skipped = [r for r in results if r.get("skipped")]
    if skipped:
        L.append("")
        for r in skipped:
            L.append(f"- Skipped or partial: {short_label(r)}: {_md(r['skipped'])}")
    if os.path.exists(ANALYSIS_PATH):
        L.append("")
        with open(ANALYSIS_PATH) as f:
            L.append(f.read().rstrip())
    L.append("")
    with open(DOC_PATH, "w") as f:
        f.write("\n".join(L))


def _md(s: str) -> str:
    return s.replace("|", "\\|")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="smaller sizes, 3 reps (< 3 minutes)")
    g.add_argument("--full", action="store_true", help="full sizes (default)")
    g.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--module", default=os.path.join(ROOT, "target", "dist", "libxstream.so"))
    ap.add_argument("--only", default="", help="comma-separated workload id substrings (e.g. xadd,xrange-point)")
    ap.add_argument("--reps", type=int, help="override the number of reps")
    ap.add_argument("--nice", type=int, default=-10 if os.geteuid() == 0 else 0,
                    help="run redis-server at this nice value (negative needs root): on a busy shared machine a "
                         "negative value keeps other processes from preempting the server in mid-command")
    ap.add_argument("--perf", action="store_true",
                    help="perf record the server during the module arm of each workload's first rep "
                         "(bench/results/perf-<workload>.txt); use with --only")
    ap.add_argument("--docs", action="store_true", help="rewrite docs even with --only")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/BENCHMARKS.md and the SVGs")
    ap.add_argument("--regen", action="store_true",
                    help="only regenerate the docs from the newest results in bench/results (no benchmark)")
    args = ap.parse_args()
    if args.regen:
        if not regenerate_docs():
            print("xbench: no results in bench/results", file=sys.stderr)
            return 1
        print(f"xbench: wrote {os.path.relpath(DOC_PATH, ROOT)} and docs/bench/*.svg")
        return 0

    mode = "quick" if args.quick else "smoke" if args.smoke else "full"
    cfg = dict(MODES[mode])
    if args.reps:
        cfg["reps"] = args.reps
    only = [o.strip() for o in args.only.split(",") if o.strip()] or None
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            print(f"xbench: {tool} not found (make deps installs it)", file=sys.stderr)
            return 2
    if not os.path.exists(args.module):
        print(f"xbench: {args.module} not found (make build)", file=sys.stderr)
        return 2

    machine = machine_info(args.module)
    server = Server(args.module, args.nice)
    started = _dt.datetime.now()

    def on_signal(signum, _frame):
        server.stop()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.time()
    try:
        server.start()
        log(f"{mode} run: redis-server pid {server.proc.pid} on port {server.port}, module copy in {server.dir}")
        b = Bench(server, mode, cfg, only)
        b.perf = args.perf
        b.run_all()
    finally:
        server.stop()
    machine["loadavg_end"] = os.getloadavg()
    doc = {
        "tool": "bench/xbench.py", "mode": mode, "only": only, "started": started.strftime("%Y-%m-%d %H:%M:%S"),
        "duration_s": time.time() - t0, "config": cfg, "machine": machine, "server_nice": args.nice,
        "results": b.results,
    }
    doc["noise_floor"] = noise_floor(b.results)
    os.makedirs(RESULTS_DIR, exist_ok=True)
    name = started.strftime("%Y%m%d-%H%M%S") + ("" if mode == "full" else "-" + mode) + ("-partial" if only else "") + ".json"
    path = os.path.join(RESULTS_DIR, name)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    log(f"wrote {os.path.relpath(path, ROOT)} ({doc['duration_s']:.0f} s)")
    if not args.no_docs and (args.docs or not only):
        # (A partial run rewrites the page only with --docs.)
        if only:
            write_report(doc, os.path.relpath(path, ROOT))
        else:
            regenerate_docs()
        log(f"wrote {os.path.relpath(DOC_PATH, ROOT)} and docs/bench/*.svg")
    print_table(b.results, doc["noise_floor"])
    return 0


def print_table(results: list[dict], floor: dict) -> None:
    print()
    print(f"{'workload':<34} {'native':>12} {'module':>12} {'ratio':>6} {'A/A':>6} {'proc':>6} {'client':>6}  verdict")
    for r in results:
        s = r["summary"]
        if not s:
            print(f"{r['id']:<34} {r.get('skipped', '')}")
            continue
        print(f"{r['id']:<34} {fmt_val(s.get('n'), r['unit']):>12} {fmt_val(s.get('m'), r['unit']):>12} "
              f"{fmt_ratio(s.get('ratio')):>6} {fmt_ratio(s.get('aa')):>6} {fmt_ratio(s.get('proc_ratio')):>6} "
              f"{fmt_ratio(s.get('client_ratio')):>6}  {s.get('verdict', '')}{'  (' + r['skipped'] + ')' if r.get('skipped') else ''}")
    if floor.get("cmd_median") is not None:
        pct = lambda v: "—" if v is None else f"{v * 100:.1f}%"  # no client figures in some selections (rdb)
        print(f"A/A noise floor (cmd CPU): median {pct(floor['cmd_median'])}, max {pct(floor['cmd_max'])}; "
              f"client: median {pct(floor.get('client_median'))}, max {pct(floor.get('client_max'))}")


if __name__ == "__main__":
    sys.exit(main())
