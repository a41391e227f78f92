#!/usr/bin/env python3
"""Instructions per command, module build A vs build B (or XS.* vs X*), under callgrind.

Wall-clock ratios on a busy 2-core machine move by several percent between runs; instruction
counts do not. This runs redis-server under `valgrind --tool=callgrind --instr-atstart=no`, loads
the module, prepares the keys, switches instrumentation on for exactly the measured commands
(callgrind_control -i on/off), and reads the instruction total (Ir) of that window. Each workload
is run once per module build; the figure is instructions per command (server and module
together, so a ratio is what a client pays per command in CPU work).

    bench/instr_cmp.py --module A.so --module B.so [--ops 5000] [--workload NAME ...]

A module may be given as `path:xstream.compression=lz4` (the server starts with that config;
several: `path:k=v,k2=v2`);
its rows then include "(no timer)": the same count less the background compression step's
instructions (src/jobs/pack.rs), i.e. what the commands themselves cost.

Workloads: add (XS.ADD * with 1 field), add5 (5 fields), idmpauto5 (XS.ADD IDMPAUTO p * with
5 fields; needs a build with IDMP), readack (XS.READGROUP COUNT 10 > then XS.ACK of the 10),
claim (XS.READGROUP CLAIM 0 COUNT 10 then XS.ACK; needs CLAIM), range (XS.RANGE s - + COUNT 10 on
a stream of 10 entries per op), recent (XS.RANGE <an ID among the last 10,000> + COUNT 100 on 50,000
~200-byte events; with `:xstream.tier-dir=tier,xstream.tier-memory=2mb` the older nodes on disk, the read's in
RAM: bench/tiering_big.py's tail reads), recent_reloaded (the same after a DEBUG RELOAD; add
`enable-debug-command=yes` to the module's configs), tail (XS.REVRANGE s + - COUNT 10 on the same stream: the tail
node; with `:xstream.tier-dir=tier,xstream.tier-memory=0`, every other node on disk), builtin_add (XADD, as a yardstick); readgroup / builtin_readgroup
(XS.READGROUP / XREADGROUP COUNT 10 >, nothing acknowledged), ack / builtin_ack (XS.ACK / XACK of 10
pending IDs), builtin_readack (readack with XREADGROUP + XACK): the consumer-group pair apart; trim /
builtin_trim (XS.TRIM / XTRIM MAXLEN = half of a 20,000-entry stream, one per op); pending /
builtin_pending (the XPENDING summary of 10,000 entries pending for one consumer); xclaim /
builtin_xclaim (XS.CLAIM / XCLAIM g c2 0 of 10 of those pending IDs, with their entries) and
xclaim_justid / builtin_xclaim_justid (the same 10 IDs every time, JUSTID); infofull /
builtin_infofull (XINFO STREAM FULL COUNT 10 of 20,000 entries, 20 consumers with 1,000 pending
each: each consumer's first 10 looked up in the group PEL) and pending_consumer /
builtin_pending_consumer (XPENDING g IDLE 0 - + 10 c3 on the same); maxlen_add /
builtin_maxlen_add (XS.ADD / XADD MAXLEN ~ 1000 * f v from an empty stream); range_json (XS.RANGE
COUNT 100 at spread starts of 20,000 JSON-like events: with `--module path:xstream.compression=lz4`,
the read of compressed nodes); dump / builtin_dump and restore / builtin_restore (DUMP of a slot
move's stream, 100,000 entries (XSTREAM_MOVE_ENTRIES) with two groups and 810 pending, and its
RESTORE ... REPLACE: bench/cluster_bench.py's slot move, a tenth; use a small --ops).
Retention (issue 17; each on a stream holding 20,000 entries of 1970 first, which the first adds
trim): minid_add (XS.ADD s MINID ~ <now - 60 s> * f v), maxage_add (XS.ADD s * f v on a stream with
XS.CFGSET MAXAGE 60000), maxage_exact_add (the same with EXACT), maxage_inline_add (XS.ADD s
MAXAGE ~ 60000 * f v).
Delayed delivery (issue 17; a build with NOTBEFORE / DELAY): delay_add (XS.ADD s DELAY 60000 * f v),
queue (XS.ADD, XS.READGROUP COUNT 1 > of it, XS.ACK: a consumer keeping up; per command),
queue_groups10 (the same with nine idle groups on the stream), delayed_readack (readack on a stream where every other entry is due in an hour: each read passes
over ~10 entries to deliver 10), scheduled_readack (readack served from the group's schedule: every
entry passed over by one read, then due).
"""

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time

from serverlib import redis_server, wait_tier_idle


RECENT_ENTRIES = 50_000

# The workloads on 20 consumers' pending entries.
CONSUMERS20 = ("infofull", "builtin_infofull", "pending_consumer", "builtin_pending_consumer")

FIVE = ["a", "1", "bb", "22", "ccc", "333", "dddd", "4444", "eeeee", "55555"]


# XS.READGROUP and XS.ACK measured apart, each beside its built-in twin on the same server
# (issue 29): (module command, built-in command, key).
SPLIT = {
    "readgroup": ("XS.READGROUP", "XS.ADD", "XS.GROUP", "m"),
    "builtin_readgroup": ("XREADGROUP", "XADD", "XGROUP", "b"),
    "ack": ("XS.ACK", "XS.ADD", "XS.GROUP", "m"),
    "builtin_ack": ("XACK", "XADD", "XGROUP", "b"),
    "builtin_readack": ("XREADGROUP", "XADD", "XGROUP", "b"),
}


def prepare(r, name, ops):
    r.flushall()
    if name in SPLIT:
        read, add, group, key = SPLIT[name]
        pipe = r.pipeline(transaction=False)
        for i in range(ops * 10):
            pipe.execute_command(add, key, f"{i + 1}-0", "f", "v")
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        r.execute_command(group, "CREATE", key, "g", "0")
        if name.endswith("ack") and not name.endswith("readack"):
            # Every entry pending, to be acknowledged 10 at a time.
            r.execute_command("XS.READGROUP" if key == "m" else "XREADGROUP", "GROUP", "g", "c", "COUNT", str(ops * 10), "STREAMS", key, ">")
        return
    if name in MOVE:
        # The slot move's stream (bench/cluster_bench.py's, a tenth: MOVE_ENTRIES entries, ten per
        # ms, one field; groups g1 with 500 + 300 pending, g2 with 10), module or built-in; for a
        # restore, its DUMP payload kept to restore.
        p, key = MOVE[name]
        r.execute_command(p + "GROUP", "CREATE", key, "g1", "$", "MKSTREAM")
        r.execute_command(p + "GROUP", "CREATE", key, "g2", "$")
        pipe = r.pipeline(transaction=False)
        for i in range(MOVE_ENTRIES):
            pipe.execute_command(p + "ADD", key, f"{1000000 + i // 10}-{i % 10}", "f", str(i))
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        for g, c, n in (("g1", "a", 500), ("g1", "b", 300), ("g2", "c", 10)):
            r.execute_command(p + "READGROUP", "GROUP", g, c, "COUNT", str(n), "STREAMS", key, ">")
        PAYLOAD[name] = r.execute_command("DUMP", key)
        return
    if name in ("pending", "builtin_pending", "xclaim", "builtin_xclaim", "xclaim_justid", "builtin_xclaim_justid"):
        # 10,000 pending entries of one consumer (the summary form reads counts and edges).
        add, group, read, key = ("XS.ADD", "XS.GROUP", "XS.READGROUP", "p") if not name.startswith("builtin") else ("XADD", "XGROUP", "XREADGROUP", "bp")
        pipe = r.pipeline(transaction=False)
        for i in range(10000):
            pipe.execute_command(add, key, f"{1000000000000 + i // 10}-{i % 10}", "f", str(i))
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        r.execute_command(group, "CREATE", key, "g", "0")
        r.execute_command(read, "GROUP", "g", "c1", "COUNT", "10000", "STREAMS", key, ">")
        r.response_callbacks.pop("XCLAIM", None)  # redis-py would parse a JUSTID reply as entries
        return
    if name in CONSUMERS20:
        # 20 consumers, each with 1,000 consecutive pending entries (bench/command_survey.py's
        # data, a fifth).
        add, group, read, key = ("XADD", "XGROUP", "XREADGROUP", "bc") if name.startswith("builtin") else ("XS.ADD", "XS.GROUP", "XS.READGROUP", "c")
        pipe = r.pipeline(transaction=False)
        for i in range(20000):
            pipe.execute_command(add, key, f"{i + 1}-0", "f", str(i), "g", "x" * 20)
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        r.execute_command(group, "CREATE", key, "g1", "0")
        for c in range(20):
            r.execute_command(read, "GROUP", "g1", f"c{c}", "COUNT", "1000", "STREAMS", key, ">")
        for cb in ("XPENDING", "XINFO STREAM"):  # redis-py would parse the built-in's replies
            r.response_callbacks.pop(cb, None)
        return
    if name in ("trim", "builtin_trim"):
        # One stream of TRIM_ENTRIES per op, entries as the bench's (ten per ms, one field).
        add = "XS.ADD" if name == "trim" else "XADD"
        pipe = r.pipeline(transaction=False)
        for k in range(ops):
            for i in range(TRIM_ENTRIES):
                pipe.execute_command(add, f"t{k}", f"{1000000000000 + i // 10}-{i % 10}", "f", str(i))
                if len(pipe) >= 1000:
                    pipe.execute()
        pipe.execute()
        return
    if name in ("recent", "recent_reloaded"):
        # 50,000 entries of ~200 bytes with IDs 1-0 .. 50000-0: with
        # `:xstream.tier-dir=tier,xstream.tier-memory=2mb` the newest sealed nodes stay in RAM
        # (about the last 10,000 entries) and the older ones go to disk.
        pipe = r.pipeline(transaction=False)
        for i in range(1, RECENT_ENTRIES + 1):
            pipe.execute_command("XS.ADD", "s", f"{i}-0", "event", f"{{\"user\":\"user-{i % 5000}\",\"action\":\"click\",\"page\":\"/p/{i % 300}\",\"ts\":{1700000000000 + i * 37},\"ref\":\"campaign-{i % 40}\",\"pad\":\"{'x' * 60}\"}}")
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        budget = int(r.config_get("xstream.tier-memory").get("xstream.tier-memory", 0) or 0)
        wait_tier_idle(r.info, budget)
        if name == "recent_reloaded":
            # The same stream saved and loaded again (a load that tiers as it reads, when
            # tiering is on): needs `enable-debug-command=yes` among the module's configs.
            r.execute_command("DEBUG", "RELOAD")
            wait_tier_idle(r.info, budget)
        return
    if name in ("readack", "claim", "range", "tail"):
        pipe = r.pipeline(transaction=False)
        for i in range(ops * 10):
            pipe.execute_command("XS.ADD", "s", "*", "f", "v")
        pipe.execute()
        r.execute_command("XS.GROUP", "CREATE", "s", "g", "0")
        # With `:xstream.tier-dir=...` on the module path: the tiering step done first.
        wait_tier_idle(r.info, field="xstream_tier_resident_queued_nodes")
    if name in ("delayed_readack", "scheduled_readack"):
        # Delayed delivery (issue 17). delayed_readack: every other entry due in an hour, so each
        # `>` read passes over about 10 entries (scheduling them) to deliver 10. scheduled_readack:
        # every entry due 1.5 s after the add, all passed over by one read, then served from the
        # schedule once due.
        pipe = r.pipeline(transaction=False)
        for i in range(ops * 20 if name == "delayed_readack" else ops * 10):
            if name == "scheduled_readack" or i % 2 == 1:
                pipe.execute_command("XS.ADD", "s", "DELAY", "3600000" if name == "delayed_readack" else "1500", "*", "f", "v")
            else:
                pipe.execute_command("XS.ADD", "s", "*", "f", "v")
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        r.execute_command("XS.GROUP", "CREATE", "s", "g", "0")
        if name == "scheduled_readack":
            r.execute_command("XS.READGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")
            time.sleep(1.6)
    if name == "range_json":
        # 20,000 JSON-like events of ~200 bytes (as bench/compression.py's), explicit IDs; with
        # `:xstream.compression=lz4` on the module path, every sealed node compressed first.
        pipe = r.pipeline(transaction=False)
        for i in range(1, 20001):
            ev = '{"user":"user-%d","action":"%s","ts":%d,"props":{"page":"/product/%d","ref":"campaign-%d","device":"%s","ms":%d}}' % (
                i * 7919 % 5000, ["click", "view", "purchase", "login"][i % 4], 1700000000000 + i * 37, i % 97, i % 20, ["mobile", "desktop"][i % 3 == 0], i * 31 % 2000)
            pipe.execute_command("XS.ADD", "s", f"{i}-0", "event", ev)
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        for _ in range(500):
            if r.info("xstream").get("xstream_compression_queued_keys", 0) == 0:
                break
            time.sleep(0.02)
    if name in ("queue", "queue_groups10"):
        # A queue that keeps up: one group reading each entry as it comes; queue_groups10 has
        # nine more groups on the stream that read nothing (lags growing).
        r.execute_command("XS.GROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        if name == "queue_groups10":
            for g in range(9):
                r.execute_command("XS.GROUP", "CREATE", "s", f"idle{g}", "$")
    if name in RETENTION:
        pipe = r.pipeline(transaction=False)
        for i in range(1, 20001):
            pipe.execute_command("XS.ADD", "s", f"{i}-0", "f", "v")
        pipe.execute()
        if name == "maxage_add":
            r.execute_command("XS.CFGSET", "s", "MAXAGE", "60000")
        elif name == "maxage_exact_add":
            r.execute_command("XS.CFGSET", "s", "MAXAGE", "60000", "EXACT")


# dump / restore (module) and builtin_dump / builtin_restore: the DUMP of a slot move's stream
# and its RESTORE (REPLACE, into another key) per op; the stream has MOVE_ENTRIES entries.
MOVE = {"dump": ("XS.", "m"), "restore": ("XS.", "m"), "builtin_dump": ("X", "b"), "builtin_restore": ("X", "b")}
MOVE_ENTRIES = int(os.environ.get("XSTREAM_MOVE_ENTRIES", "100000"))
PAYLOAD = {}

# trim / builtin_trim: XS.TRIM / XTRIM MAXLEN = half, one stream of this many entries per op.
TRIM_ENTRIES = int(os.environ.get("XSTREAM_TRIM_ENTRIES", "20000"))

RETENTION = ("minid_add", "maxage_add", "maxage_exact_add", "maxage_inline_add")


def run(r, name, ops):
    pipe = r.pipeline(transaction=False)
    if name == "add":
        for _ in range(ops):
            pipe.execute_command("XS.ADD", "s", "*", "f", "v")
    elif name == "builtin_add":
        for _ in range(ops):
            pipe.execute_command("XADD", "b", "*", "f", "v")
    elif name in ("maxlen_add", "builtin_maxlen_add"):
        cmd, key = ("XS.ADD", "ml") if name == "maxlen_add" else ("XADD", "bml")
        for _ in range(ops):
            pipe.execute_command(cmd, key, "MAXLEN", "~", "1000", "*", "f", "v")
    elif name == "minid_add":
        cut = str(int(time.time() * 1000) - 60000)
        for _ in range(ops):
            pipe.execute_command("XS.ADD", "s", "MINID", "~", cut, "*", "f", "v")
    elif name in ("maxage_add", "maxage_exact_add"):
        for _ in range(ops):
            pipe.execute_command("XS.ADD", "s", "*", "f", "v")
    elif name == "maxage_inline_add":
        for _ in range(ops):
            pipe.execute_command("XS.ADD", "s", "MAXAGE", "~", "60000", "*", "f", "v")
    elif name in ("readgroup", "builtin_readgroup"):
        read, _, _, key = SPLIT[name]
        for _ in range(ops):
            pipe.execute_command(read, "GROUP", "g", "c", "COUNT", "10", "STREAMS", key, ">")
    elif name in ("ack", "builtin_ack"):
        ack, _, _, key = SPLIT[name]
        for i in range(ops):
            pipe.execute_command(ack, key, "g", *[f"{i * 10 + j + 1}-0" for j in range(10)])
    elif name == "builtin_readack":
        for _ in range(ops):
            ids = r.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "b", ">")
            got = [e[0] for e in ids[0][1]] if ids else []
            r.execute_command("XACK", "b", "g", *got)
        return ops * 2
    elif name in ("pending", "builtin_pending"):
        cmd, key = ("XS.PENDING", "p") if name == "pending" else ("XPENDING", "bp")
        for _ in range(ops):
            pipe.execute_command(cmd, key, "g")
    elif name in ("xclaim", "builtin_xclaim", "xclaim_justid", "builtin_xclaim_justid"):
        # XCLAIM of 10 pending IDs with their entries, min-idle 0, to consumer c2 (a fixed
        # sequence over the 10,000: each op claims 10 consecutive entries); `_justid`: the
        # same 10 IDs every time, JUSTID.
        cmd, key = ("XS.CLAIM", "p") if not name.startswith("builtin") else ("XCLAIM", "bp")
        justid = name.endswith("justid")
        for i in range(ops):
            n = (0 if justid else i) * 10
            ids = [f"{1000000000000 + (n + j) % 10000 // 10}-{(n + j) % 10}" for j in range(10)]
            pipe.execute_command(cmd, key, "g", "c2", "0", *ids, *(["JUSTID"] if justid else []))
    elif name in CONSUMERS20:
        p, key = ("X", "bc") if name.startswith("builtin") else ("XS.", "c")
        for _ in range(ops):
            if name.endswith("infofull"):
                pipe.execute_command(p + "INFO", "STREAM", key, "FULL", "COUNT", "10")
            else:
                pipe.execute_command(p + "PENDING", key, "g1", "IDLE", "0", "-", "+", "10", "c3")
    elif name in ("trim", "builtin_trim"):
        cmd = "XS.TRIM" if name == "trim" else "XTRIM"
        for k in range(ops):
            pipe.execute_command(cmd, f"t{k}", "MAXLEN", "=", str(TRIM_ENTRIES // 2))
    elif name in MOVE:
        key = MOVE[name][1]
        for _ in range(ops):
            if "dump" in name:
                pipe.execute_command("DUMP", key)
            else:
                pipe.execute_command("RESTORE", key + "2", "0", PAYLOAD[name], "REPLACE")
    elif name == "range":
        for _ in range(ops):
            pipe.execute_command("XS.RANGE", "s", "-", "+", "COUNT", "10")
    elif name in ("recent", "recent_reloaded"):
        # XS.RANGE <an ID among the last 10,000> + COUNT 100 (a fixed sequence): the tail reads of
        # bench/tiering_big.py, in RAM under a tiering budget.
        for i in range(ops):
            pipe.execute_command("XS.RANGE", "s", str(RECENT_ENTRIES - 10_000 + i * 7877 % 9900), "+", "COUNT", "100")
    elif name == "tail":
        for _ in range(ops):
            pipe.execute_command("XS.REVRANGE", "s", "+", "-", "COUNT", "10")
    elif name == "range_json":
        # XS.RANGE COUNT 100 from a start spread over the stream (a fixed sequence).
        for i in range(ops):
            pipe.execute_command("XS.RANGE", "s", str(1 + i * 7877 % 19800), "+", "COUNT", "100")
    elif name == "add5":
        for _ in range(ops):
            pipe.execute_command("XS.ADD", "s", "*", *FIVE)
    elif name == "idmpauto5":
        for i in range(ops):
            pipe.execute_command("XS.ADD", "s", "IDMPAUTO", "p", "*", "n", str(i), *FIVE[2:])
        # The same with distinct content per entry (every entry is new: no duplicate shortcut).
    elif name == "delay_add":
        for _ in range(ops):
            pipe.execute_command("XS.ADD", "s", "DELAY", "60000", "*", "f", "v")
    elif name in ("queue", "queue_groups10"):
        for _ in range(ops):
            id = r.execute_command("XS.ADD", "s", "*", "f", "v")
            r.execute_command("XS.READGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")
            r.execute_command("XS.ACK", "s", "g", id)
        return ops * 3
    elif name in ("readack", "claim", "delayed_readack", "scheduled_readack"):
        extra = ["CLAIM", "0"] if name == "claim" else []
        for _ in range(ops):
            ids = r.execute_command("XS.READGROUP", "GROUP", "g", "c", *extra, "COUNT", "10", "STREAMS", "s", ">")
            got = [e[0] for e in ids[0][1]] if ids else []
            r.execute_command("XS.ACK", "s", "g", *got)
        return ops * 2
    pipe.execute()
    return ops


# `--cache`: callgrind's cache simulation too (first-level instruction and data misses per
# command: rows "<workload> I1mr", "D1mr", "D1mw"; about three times slower).
CACHE_SIM = False


def timer_ir(path):
    """Instructions spent in the background compression step (inclusive), from a dump."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "pack_timer::tick" in line or "jobs::pack::Pack as" in line:
            m = re.match(r"\s*([\d,]+)", line)
            if m:
                return int(m.group(1).replace(",", ""))
    return 0


def measure(server, module, workloads, ops):
    # `path:xstream.compression=lz4`: the server started with that config.
    module, _, conf = module.partition(":")
    module = os.path.abspath(module)  # the server runs in its own --dir
    extra = []
    for kv in filter(None, conf.split(",")):
        k, _, v = kv.partition("=")
        extra += [f"--{k}", v]
    d = tempfile.mkdtemp(prefix="xstream-instr-")  # callgrind's dumps (the server's own dir is serverlib's)
    out = os.path.join(d, "callgrind.out")
    callgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    if CACHE_SIM:
        callgrind.insert(2, "--cache-sim=yes")
    res = {}
    try:
        with redis_server(server, module, extra, wrapper=callgrind, prefix="xstream-instr-", start_timeout_s=60) as (r, p, _):
            for w in workloads:
                prepare(r, w, ops)
                subprocess.run(["callgrind_control", "-z", str(p.pid)], capture_output=True)
                subprocess.run(["callgrind_control", "-i", "on", str(p.pid)], capture_output=True)
                n = run(r, w, ops)
                subprocess.run(["callgrind_control", "-i", "off", str(p.pid)], capture_output=True)
                dump = subprocess.run(["callgrind_control", "-d", f"w-{w}", str(p.pid)], capture_output=True, text=True)
                time.sleep(0.5)
                files = sorted(f for f in os.listdir(d) if f.startswith("callgrind.out") and f"w-{w}" in open(os.path.join(d, f), errors="ignore").read(4000))
                total = None
                tick = 0
                misses = None
                for f in files:
                    text = open(os.path.join(d, f), errors="ignore").read()
                    m = re.search(r"^totals:\s+(\d+)", text, re.M)
                    if m:
                        total = int(m.group(1))
                        tick = timer_ir(os.path.join(d, f))
                    if CACHE_SIM:
                        ev = re.search(r"^events:\s+(.*)$", text, re.M)
                        tot = re.search(r"^totals:\s+(.*)$", text, re.M)
                        if ev and tot:
                            misses = dict(zip(ev.group(1).split(), map(int, tot.group(1).split())))
                res[w] = total / n if total else None
                if misses:
                    for k in ("I1mr", "D1mr", "D1mw", "ILmr", "DLmr"):
                        if k in misses:
                            res[f"{w} {k}"] = misses[k] / n
                if conf:
                    res[w + " (no timer)"] = (total - tick) / n if total else None
    finally:
        keep = os.environ.get("XSTREAM_INSTR_KEEP")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for f in os.listdir(d):
                if f.startswith("callgrind.out"):
                    shutil.copy(os.path.join(d, f), os.path.join(keep, os.path.basename(os.path.dirname(os.path.dirname(module))) + "-" + f))
        shutil.rmtree(d, ignore_errors=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", action="append", required=True)
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--workload", action="append")
    ap.add_argument("--cache", action="store_true", help="simulate the caches too: I1/D1 misses per command")
    a = ap.parse_args()
    global CACHE_SIM
    CACHE_SIM = a.cache
    workloads = a.workload or ["add", "add5", "readack", "range", "builtin_add"]
    results = [measure(a.server, m, workloads, a.ops) for m in a.module]
    print(f"{'workload':<12}" + "".join(f"{os.path.basename(os.path.dirname(os.path.dirname(m)))[:18]:>20}" for m in a.module) + "     B/A")
    rows = list(workloads) + [k for k in results[-1] if k not in workloads]
    for w in rows:
        vals = [r.get(w, r.get(w.replace(" (no timer)", ""))) for r in results]
        ratio = f"{vals[1] / vals[0]:.4f}" if len(vals) > 1 and vals[0] and vals[1] else ""
        print(f"{w:<12}" + "".join(f"{(v or 0):>20.0f}" for v in vals) + f"   {ratio}")


if __name__ == "__main__":
    main()
