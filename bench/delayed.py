#!/usr/bin/env python3
"""Delayed delivery lateness (issue 17, docs/retention.md "Time in the stream").

A producer adds N entries to one stream, pipelined, each due at a random time uniform in
[0, SPREAD] ms after the start (`XS.ADD k NOTBEFORE <due> * due <due>`: DELAY with the absolute
time computed by the client, so that both sides agree on the due time to the millisecond).
C consumer processes loop on `XS.READGROUP GROUP g cN COUNT 100 BLOCK 5000 STREAMS k >` (not
acknowledging: the PEL keeps the server's delivery time of each entry). For each entry:

    lateness = receive time - max(due time, insertion time)

(the insertion time is the entry ID's milliseconds: an entry added after its due time is an
ordinary entry, and what it measures is then the delivery of a new entry). Reports p50 / p99 /
max lateness (all entries; delayed ones, those due while the producer ran and after; and the
server side: the PEL's delivery time - due time, without the clients' own scheduling), the
entries delivered before their due time (must be 0), the server's CPU and the load average.

    bench/delayed.py [--entries 1000000] [--spread-ms 60000] [--consumers 4]
                     [--server redis-server] [--module target/release/libxstream.so]
"""

import argparse
import multiprocessing as mp
import os
import random
import time

import redis

from serverlib import redis_server


def now_ms():
    return time.time() * 1000.0


def consumer(port, name, total, done, out_q):
    r = redis.Redis(port=port)
    late = []
    early = 0
    while done.value < total:
        try:
            reply = r.execute_command("XS.READGROUP", "GROUP", "g", name, "COUNT", "100", "BLOCK", "5000", "STREAMS", "k", ">")
        except redis.exceptions.ConnectionError:
            break
        t = now_ms()
        if not reply:
            continue
        ids = []
        for _key, entries in reply:
            for eid, fields in entries:
                ids.append(eid)
                fd = dict(zip(fields[::2], fields[1::2]))
                due = int(fd[b"due"])
                ins = int(eid.split(b"-")[0])
                d = t - max(due, ins)
                if t < due:
                    early += 1
                # (lateness, delayed: added before its due time, due time)
                late.append((d, due > ins, due))
        # Not acknowledged: the PEL keeps the server's delivery time of each entry (read at the end).
        with done.get_lock():
            done.value += len(ids)
    out_q.put((late, early))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--module", default=os.path.join(os.path.dirname(__file__), "..", "target/release/libxstream.so"))
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--spread-ms", type=int, default=60_000)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1000)
    a = ap.parse_args()
    module = os.path.abspath(a.module)
    with redis_server(a.server, module, prefix="xstream-delay-") as (r, _proc, _dir):
        port = r.connection_pool.connection_kwargs["port"]
        load0 = os.getloadavg()
        r.execute_command("XS.GROUP", "CREATE", "k", "g", "$", "MKSTREAM")
        done = mp.Value("q", 0)
        q = mp.Queue()
        procs = [mp.Process(target=consumer, args=(port, f"c{i}", a.entries, done, q)) for i in range(a.consumers)]
        for pr in procs:
            pr.start()
        time.sleep(0.5)
        cpu0 = sum(float(r.info("cpu")[k]) for k in ("used_cpu_user", "used_cpu_sys"))
        t0 = now_ms()
        rng = random.Random(17)
        pipe = r.pipeline(transaction=False)
        for i in range(a.entries):
            due = int(t0 + rng.uniform(0, a.spread_ms))
            pipe.execute_command("XS.ADD", "k", "NOTBEFORE", str(due), "*", "due", str(due))
            if len(pipe) >= a.batch:
                pipe.execute()
        pipe.execute()
        t_prod = now_ms() - t0
        deadline = time.time() + a.spread_ms / 1000.0 + 60
        while done.value < a.entries and time.time() < deadline:
            time.sleep(0.2)
        t_all = now_ms() - t0
        cpu1 = sum(float(r.info("cpu")[k]) for k in ("used_cpu_user", "used_cpu_sys"))
        info = r.info("xstream")
        late, early = [], 0
        for _ in procs:
            l, e = q.get(timeout=120)
            late.extend(l)
            early += e
        for pr in procs:
            pr.join(timeout=10)
        # Server-side lateness: the delivery time each entry got in the PEL (XS.PENDING's idle time
        # against the server's TIME just before it, same event-loop pass), less the due time.
        server_late = []
        start = "-"
        while True:
            pipe = r.pipeline(transaction=False)
            pipe.execute_command("TIME")
            pipe.execute_command("XS.PENDING", "k", "g", "IDLE", "0", start, "+", "10000")
            tm, pend = pipe.execute()
            if not pend:
                break
            now_srv = int(tm[0]) * 1000 + int(tm[1]) // 1000
            ids = [e[0] for e in pend]
            dues = r.pipeline(transaction=False)
            for eid in ids:
                dues.execute_command("XS.RANGE", "k", eid, eid)
            for e, rng_ in zip(pend, dues.execute()):
                fd = dict(zip(rng_[0][1][::2], rng_[0][1][1::2]))
                due = int(fd[b"due"])
                ins = int(e[0].split(b"-")[0])
                if due > ins:
                    server_late.append(now_srv - int(e[2]) - due)
            start = "(" + ids[-1].decode()
        server_late.sort()
        load1 = os.getloadavg()
        print(f"entries {a.entries}, spread {a.spread_ms} ms, consumers {a.consumers}; produced in {t_prod / 1000:.1f} s; all received after {t_all / 1000:.1f} s")
        print(f"delivered {len(late)}, before their due time: {early}")
        t_end = t0 + t_prod

        def show(label, xs):
            xs = sorted(xs)
            n = len(xs)
            if not n:
                return
            pct = lambda x: xs[min(n - 1, int(x * n))]
            print(f"lateness ms, {label} ({n}): p50 {pct(0.50):.1f}  p99 {pct(0.99):.1f}  p99.9 {pct(0.999):.1f}  max {xs[-1]:.1f}")

        show("all entries", [d for d, _, _ in late])
        show("delayed entries (added before their due time)", [d for d, dl, _ in late if dl])
        show("delayed entries due while the producer ran", [d for d, dl, due in late if dl and due <= t_end])
        show("delayed entries due after the producer ended", [d for d, dl, due in late if dl and due > t_end])
        show("entries added after their due time (ordinary)", [d for d, dl, _ in late if not dl])
        show("delayed entries, server side (PEL delivery time - due time)", server_late)
        print(f"server CPU {cpu1 - cpu0:.1f} s over {t_all / 1000:.1f} s ({100 * (cpu1 - cpu0) / (t_all / 1000):.0f} % of a core)")
        print(f"INFO xstream: entries_delayed {info.get('xstream_entries_delayed', info.get('entries_delayed'))}, "
              f"entries_scheduled_delivered {info.get('xstream_entries_scheduled_delivered', info.get('entries_scheduled_delivered'))}")
        print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
