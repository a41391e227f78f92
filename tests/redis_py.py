"""A real client against the module in takeover mode: redis-py's own stream API.

Starts a redis-server on a free port with `--loadmodule libxstream.so takeover yes` (and, as the
oracle, a plain redis-server with the built-in streams) and runs every test against both, in RESP2
and RESP3: the expected values are written out exactly, so passing on the built-in proves the
expectation and passing on the module proves the module.

- test_takeover_active: the module is loaded, takeover is on, TYPE says `stream` for the module's
  streams too (OBJECT ENCODING `raw` shows it is the module's).
- test_basic_api: xadd (explicit IDs, '*', nomkstream, maxlen exact / approximate, minid), xlen,
  xrange, xrevrange, xdel, xtrim.
- test_producer_consumer_group: a producer thread, two consumer threads with blocking
  XREADGROUP, a blocking XREAD reader, acks, a crashed consumer whose entries are recovered with
  xclaim / xclaim justid / xautoclaim (one of them deleted meanwhile), xpending, xpending_range,
  xinfo_stream (plain and full), xinfo_groups, xinfo_consumers, a NOACK group, xgroup_setid,
  xgroup_createconsumer, xgroup_delconsumer, xgroup_destroy.
- test_blocking_timeouts: XREAD / XREADGROUP BLOCK that time out.

Module: env XSTREAM_MODULE, else target/dist/libxstream.so (run `make build`).
Run: `.venv/bin/pytest tests/redis_py.py` (the Makefile's `test` target sets up .venv).
"""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
MODULE = Path(os.environ.get("XSTREAM_MODULE") or ROOT / "target" / "dist" / "libxstream.so")


def free_port():
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port


class Server:
    """One redis-server child in its own temp dir; stop() ends only that child."""

    def __init__(self, module_args=None):
        self.dir = Path(tempfile.mkdtemp(prefix="xstream-pytest-"))
        self.proc = None
        args = []
        if module_args is not None:
            if not MODULE.exists():
                pytest.fail(f"{MODULE} not found: run `make build` or set XSTREAM_MODULE")
            so = self.dir / "libxstream.so"
            shutil.copy(MODULE, so)  # never load a file that a rebuild may overwrite
            args = ["--loadmodule", str(so), *module_args]
        for _ in range(5):
            self.port = free_port()
            cmd = [
                os.environ.get("XSTREAM_REDIS_SERVER") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), "--logfile", str(self.dir / "redis.log"),
                "--save", "", "--appendonly", "no", "--protected-mode", "no",
                *args,
            ]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    if redis.Redis(port=self.port, socket_timeout=1).ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.02)
            log = (self.dir / "redis.log").read_text(errors="replace") if (self.dir / "redis.log").exists() else ""
            self.stop(remove=False)
            if "Address already in use" not in log:
                pytest.fail(f"redis-server did not start: {cmd}\n{log[-3000:]}")
        pytest.fail("redis-server: no free port")

    def stop(self, remove=True):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def servers():
    builtin = Server()
    module = Server(["takeover", "yes"])
    yield {"builtin": builtin, "module": module}
    module.stop()
    builtin.stop()


@pytest.fixture(params=["builtin", "module"])
def side(request):
    return request.param


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def proto(request):
    return request.param


@pytest.fixture
def conn(servers, side, proto):
    """A client factory for this side and protocol; the db is flushed first."""
    port = servers[side].port
    clients = []

    def make():
        c = redis.Redis(port=port, protocol=proto, decode_responses=True, socket_timeout=30)
        clients.append(c)
        return c

    make().flushall()
    yield make
    for c in clients:
        c.close()


def read_entries(reply):
    """XREAD / XREADGROUP reply -> {stream: [(id, fields), ...]}: RESP2 is a list of
    [name, entries], RESP3 a dict name -> [entries] (redis-py 5 wraps the list once more)."""
    if isinstance(reply, dict):
        out = {}
        for name, v in reply.items():
            if len(v) == 1 and isinstance(v[0], list):
                v = v[0]
            out[name] = [tuple(e) for e in v]
        return out
    return {name: [tuple(e) for e in entries] for name, entries in reply}


def blocked_clients(r):
    return int(r.info("clients")["blocked_clients"])


def wait_blocked(r, n, timeout=10):
    deadline = time.time() + timeout
    while blocked_clients(r) < n:
        assert time.time() < deadline, f"expected {n} blocked clients, have {blocked_clients(r)}"
        time.sleep(0.005)


def test_takeover_active(servers, proto):
    r = redis.Redis(port=servers["module"].port, protocol=proto, decode_responses=True)
    mods = [m["name"] for m in r.module_list()]
    assert "xstream" in mods
    assert r.config_get("xstream.takeover") == {"xstream.takeover": "yes"}
    r.delete("t")
    r.xadd("t", {"f": "v"}, id="1-1")
    # TYPE says stream in takeover mode; the value is the module's (OBJECT ENCODING raw).
    assert r.type("t") == "stream"
    assert r.object("encoding", "t") == "raw"
    b = redis.Redis(port=servers["builtin"].port, protocol=proto, decode_responses=True)
    b.delete("t")
    b.xadd("t", {"f": "v"}, id="1-1")
    assert b.type("t") == "stream"
    r.close()
    b.close()


def test_basic_api(conn, side):
    r = conn()
    assert r.xadd("s", {"a": "1"}, id="1-1") == "1-1"
    assert r.xadd("s", {"a": "2", "b": "two"}, id="2-0") == "2-0"
    assert r.xadd("s", {"a": "3"}, id="2-*") == "2-1"
    assert r.xlen("s") == 3
    assert r.xrange("s") == [("1-1", {"a": "1"}), ("2-0", {"a": "2", "b": "two"}), ("2-1", {"a": "3"})]
    assert r.xrange("s", min="2", max="+", count=1) == [("2-0", {"a": "2", "b": "two"})]
    assert r.xrevrange("s", max="+", min="-", count=2) == [("2-1", {"a": "3"}), ("2-0", {"a": "2", "b": "two"})]
    assert r.xrange("s", min="(2-0", max="+") == [("2-1", {"a": "3"})]
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        r.xadd("s", {"a": "x"}, id="1-1")
    # '*' generates increasing IDs.
    ids = [r.xadd("auto", {"i": str(i)}) for i in range(20)]
    assert ids == sorted(ids, key=lambda x: tuple(map(int, x.split("-"))))
    assert len(set(ids)) == 20
    # NOMKSTREAM on a missing key: nothing created.
    assert r.xadd("none", {"f": "v"}, nomkstream=True) is None
    assert r.exists("none") == 0
    # xdel: the count of deleted entries.
    assert r.xdel("s", "1-1", "9-9") == 1
    assert r.xdel("s", "1-1") == 0
    assert r.xlen("s") == 2
    # Exact MAXLEN on xadd and xtrim.
    for i in range(1, 51):
        r.xadd("t", {"n": str(i)}, id=f"{i}-0", maxlen=40, approximate=False)
    assert r.xlen("t") == 40
    assert r.xrange("t", count=1) == [("11-0", {"n": "11"})]
    assert r.xtrim("t", maxlen=30, approximate=False) == 10
    assert r.xtrim("t", minid="25-0", approximate=False) == 4
    assert r.xrange("t", count=1) == [("25-0", {"n": "25"})]
    assert r.xlen("t") == 26
    # Approximate trims remove whole nodes only (100 entries per node by default).
    for i in range(1, 351):
        r.xadd("big", {"n": str(i)}, id=f"{i}-0", maxlen=120, approximate=True)
    assert r.xlen("big") == 150
    assert r.xrange("big", count=1) == [("201-0", {"n": "201"})]
    assert r.xtrim("big", maxlen=10, approximate=True) == 100
    assert r.xlen("big") == 50
    assert r.xtrim("big", maxlen=10, approximate=True, limit=10) == 0
    assert r.xtrim("big", minid="340", approximate=False) == 39
    assert r.xadd("big", {"n": "x"}, id="400-0", minid="345", approximate=False) == "400-0"
    assert [e[0] for e in r.xrange("big")] == ["345-0", "346-0", "347-0", "348-0", "349-0", "350-0", "400-0"]
    info = r.xinfo_stream("big")
    assert info["length"] == 7
    assert info["entries-added"] == 351
    assert info["max-deleted-entry-id"] == "0-0"  # trims do not set it (7.0), XDEL does
    assert info["first-entry"] == ("345-0", {"n": "345"})
    assert info["last-entry"] == ("400-0", {"n": "x"})
    # Wrong type.
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.xadd("str", {"f": "v"})
    assert r.type("s") == "stream"
    assert r.object("encoding", "s") == ("raw" if side == "module" else "stream")


N = 300
CRASHED = 5


def test_producer_consumer_group(conn, side):
    admin = conn()
    admin.xgroup_create("orders", "workers", id="$", mkstream=True)
    assert admin.xlen("orders") == 0

    # The first CRASHED orders, read by a consumer that then dies without acking.
    first_ids = [admin.xadd("orders", {"n": str(i), "item": f"item-{i}"}) for i in range(CRASHED)]
    crashed = conn()
    got = read_entries(crashed.xreadgroup("workers", "c3", {"orders": ">"}, count=CRASHED))
    assert [e[0] for e in got["orders"]] == first_ids
    crashed.close()

    # A plain XREAD reader blocked on new entries, two group consumers blocked on '>'.
    reader_result = {}

    def reader():
        c = conn()
        reader_result["reply"] = read_entries(c.xread({"orders": "$"}, block=20000))

    processed = {"c1": [], "c2": []}
    acked = {"c1": 0, "c2": 0}
    done = threading.Event()
    errors = []

    def consumer(name):
        c = conn()
        try:
            while not done.is_set():
                reply = c.xreadgroup("workers", name, {"orders": ">"}, count=10, block=200)
                entries = read_entries(reply).get("orders", [])
                if not entries:
                    continue
                for _id, fields in entries:
                    processed[name].append(int(fields["n"]))
                acked[name] += c.xack("orders", "workers", *[e[0] for e in entries])
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=reader)]
    threads += [threading.Thread(target=consumer, args=(n,)) for n in ("c1", "c2")]
    for t in threads:
        t.start()
    wait_blocked(admin, 3)

    produced = []

    def producer():
        p = conn()
        for i in range(CRASHED, N):
            produced.append(p.xadd("orders", {"n": str(i), "item": f"item-{i}"}, maxlen=100000, approximate=True))
            if i % 10 == 0:
                time.sleep(0.002)

    pt = threading.Thread(target=producer)
    pt.start()
    pt.join(60)
    deadline = time.time() + 60
    while len(processed["c1"]) + len(processed["c2"]) < N - CRASHED and time.time() < deadline and not errors:
        time.sleep(0.01)
    done.set()
    for t in threads:
        t.join(30)
    assert not errors, errors

    # The reader was served by the first XADD after it blocked, with that entry only.
    assert reader_result["reply"] == {"orders": [(produced[0], {"n": str(CRASHED), "item": f"item-{CRASHED}"})]}
    # Every new order processed exactly once, by one of the two consumers; both worked.
    all_done = processed["c1"] + processed["c2"]
    assert sorted(all_done) == list(range(CRASHED, N))
    assert processed["c1"] and processed["c2"], {k: len(v) for k, v in processed.items()}
    assert acked["c1"] + acked["c2"] == N - CRASHED
    for name in ("c1", "c2"):
        assert processed[name] == sorted(processed[name]), f"{name} saw orders out of order"

    # Only the crashed consumer's entries are pending.
    pend = admin.xpending("orders", "workers")
    assert pend == {
        "pending": CRASHED,
        "min": first_ids[0],
        "max": first_ids[-1],
        "consumers": [{"name": "c3", "pending": CRASHED}],
    }
    rng = admin.xpending_range("orders", "workers", "-", "+", 100, consumername="c3")
    assert [(e["message_id"], e["consumer"], e["times_delivered"]) for e in rng] == [(i, "c3", 1) for i in first_ids]
    assert admin.xpending_range("orders", "workers", "-", "+", 100, idle=10**9) == []
    assert len(admin.xpending_range("orders", "workers", "-", "+", 100, idle=0)) == CRASHED
    assert admin.xpending_range("orders", "workers", "-", "+", 100, consumername="c1") == []

    # Recovery: XCLAIM two (delivery count 2), XCLAIM JUSTID one (count unchanged), one entry
    # deleted meanwhile, XAUTOCLAIM the rest.
    claimed = admin.xclaim("orders", "workers", "c1", 0, first_ids[:2])
    assert claimed == [(first_ids[i], {"n": str(i), "item": f"item-{i}"}) for i in range(2)]
    assert admin.xclaim("orders", "workers", "c1", 0, [first_ids[2]], justid=True) == [first_ids[2]]
    assert admin.xclaim("orders", "workers", "c1", 10**9, [first_ids[3]]) == []  # not idle enough
    assert admin.xdel("orders", first_ids[4]) == 1
    auto = admin.xautoclaim("orders", "workers", "c2", 0, "0-0", count=10)
    assert auto == [
        "0-0",
        [(first_ids[i], {"n": str(i), "item": f"item-{i}"}) for i in range(4)],
        [first_ids[4]],
    ]
    rng = admin.xpending_range("orders", "workers", "-", "+", 100)
    assert [(e["message_id"], e["consumer"], e["times_delivered"]) for e in rng] == [
        (first_ids[0], "c2", 3),
        (first_ids[1], "c2", 3),
        (first_ids[2], "c2", 2),
        (first_ids[3], "c2", 2),
    ]
    # JUSTID: redis-py returns only the claimed IDs.
    assert admin.xautoclaim("orders", "workers", "c1", 0, "0-0", count=2, justid=True) == first_ids[:2]
    assert admin.xack("orders", "workers", *first_ids) == 4
    assert admin.xack("orders", "workers", *first_ids) == 0
    assert admin.xpending("orders", "workers") == {"pending": 0, "min": None, "max": None, "consumers": []}

    # Group and consumer views.
    last = produced[-1]
    groups = admin.xinfo_groups("orders")
    assert groups == [
        {"name": "workers", "consumers": 3, "pending": 0, "last-delivered-id": last, "entries-read": N, "lag": 0}
    ]
    cons = admin.xinfo_consumers("orders", "workers")
    assert [(c["name"], c["pending"]) for c in cons] == [("c1", 0), ("c2", 0), ("c3", 0)]
    assert all(isinstance(c["idle"], int) and c["idle"] >= 0 for c in cons)
    info = admin.xinfo_stream("orders")
    assert {k: info[k] for k in ("length", "entries-added", "groups", "last-generated-id", "max-deleted-entry-id")} == {
        "length": N - 1,
        "entries-added": N,
        "groups": 1,
        "last-generated-id": last,
        "max-deleted-entry-id": first_ids[4],
    }
    assert info["first-entry"] == (first_ids[0], {"n": "0", "item": "item-0"})
    assert info["last-entry"] == (last, {"n": str(N - 1), "item": f"item-{N - 1}"})
    full = admin.xinfo_stream("orders", full=True)
    assert full["length"] == N - 1
    assert len(full["entries"]) == 10  # FULL shows 10 entries by default
    (g,) = full["groups"]
    assert (g["name"], g["pel-count"], g["pending"], g["entries-read"], g["lag"]) == ("workers", 0, [], N, 0)
    assert [(c["name"], c["pel-count"], c["pending"]) for c in g["consumers"]] == [
        ("c1", 0, []),
        ("c2", 0, []),
        ("c3", 0, []),
    ]

    # A NOACK group reading everything: nothing pending.
    assert admin.xgroup_create("orders", "audit", id="0")
    got = read_entries(admin.xreadgroup("audit", "a1", {"orders": ">"}, count=1000, noack=True))
    assert len(got["orders"]) == N - 1
    assert admin.xpending("orders", "audit")["pending"] == 0
    audit = [x for x in admin.xinfo_groups("orders") if x["name"] == "audit"][0]
    assert (audit["pending"], audit["last-delivered-id"], audit["entries-read"], audit["lag"]) == (0, last, N, 0)
    # SETID back to the start with a known entries-read, CREATECONSUMER, DELCONSUMER, DESTROY.
    assert admin.xgroup_setid("orders", "audit", "0", entries_read=0)
    audit = [x for x in admin.xinfo_groups("orders") if x["name"] == "audit"][0]
    # lag unknown (None): a deleted entry lies after the group's position.
    assert (audit["last-delivered-id"], audit["entries-read"], audit["lag"]) == ("0-0", 0, None)
    assert admin.xgroup_createconsumer("orders", "audit", "late") == 1
    assert admin.xgroup_createconsumer("orders", "audit", "late") == 0
    got = read_entries(admin.xreadgroup("audit", "late", {"orders": ">"}, count=3))
    assert [int(f["n"]) for _, f in got["orders"]] == [0, 1, 2]
    assert admin.xgroup_delconsumer("orders", "audit", "late") == 3
    assert admin.xgroup_delconsumer("orders", "audit", "a1") == 0
    assert admin.xgroup_destroy("orders", "audit") == 1
    assert admin.xgroup_destroy("orders", "audit") == 0
    assert [x["name"] for x in admin.xinfo_groups("orders")] == ["workers"]
    # Trim and delete what was processed.
    assert admin.xtrim("orders", maxlen=10, approximate=False) == N - 1 - 10
    assert admin.xlen("orders") == 10
    assert [int(f["n"]) for _, f in admin.xrange("orders")] == list(range(N - 10, N))
    assert admin.type("orders") == "stream"
    assert admin.object("encoding", "orders") == ("raw" if side == "module" else "stream")


def test_blocking_timeouts(conn, proto):
    r = conn()
    r.xadd("k", {"f": "v"}, id="1-1")
    r.xgroup_create("k", "g", id="$")
    empty = {} if proto == 3 else []
    t0 = time.time()
    assert r.xread({"k": "$"}, block=150) == empty
    assert r.xreadgroup("g", "c", {"k": ">"}, block=150) == empty
    assert r.xreadgroup("g", "c", {"k": ">"}, block=150, noack=True) == empty
    assert r.xread({"k": "$", "missing": "0"}, count=5, block=150) == empty
    assert 0.5 < time.time() - t0 < 10
    # Redis 7.0 creates the consumer only when it is served: a timed-out one does not exist.
    # Since 7.2 a read creates it even when nothing is delivered.
    consumers = [c["name"] for c in r.xinfo_consumers("k", "g")]
    version = tuple(int(x) for x in r.info("server")["redis_version"].split(".")[:2])
    assert consumers == ([] if version < (7, 2) else ["c"])
    # A blocked XREADGROUP served by a later XADD from another client.
    box = {}

    def waiter():
        c = conn()
        box["reply"] = read_entries(c.xreadgroup("g", "w", {"k": ">"}, block=10000))

    t = threading.Thread(target=waiter)
    t.start()
    wait_blocked(r, 1)
    r.xadd("k", {"f": "late"}, id="2-1")
    t.join(10)
    assert box["reply"] == {"k": [("2-1", {"f": "late"})]}
    assert r.xpending("k", "g")["consumers"] == [{"name": "w", "pending": 1}]
    assert [c["name"] for c in r.xinfo_consumers("k", "g")] == (["w"] if version < (7, 2) else ["c", "w"])
