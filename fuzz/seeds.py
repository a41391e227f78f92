#!/usr/bin/env python3
"""Seed corpora of the fuzz targets rdb_load and native_dump (fuzz/corpus/, not committed).

rdb_load: every value of our type in tests/fixtures/*.rdb (encodings 1 to 7), as the target
reads its input: one byte for the encoding version, then the value's bytes as Redis framed them
(from after the type ID to the end of the file: what follows the value is not read).

native_dump: DUMP payloads of built-in streams in several shapes (groups, pending entries,
deleted entries, consumers, empty), made on a redis-server this script starts on a free port
(`redis-server` on PATH, or $XSTREAM_REDIS_SERVER) and stops, without their CRC-64 (the target
appends it).

  python3 fuzz/seeds.py
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def type_id(name, encver):
    """moduleTypeEncodeId of module.c: 9 characters of 6 bits, then 10 bits of version."""
    v = 0
    for ch in name:
        v = (v << 6) | CHARSET.index(ch)
    return (v << 10) | encver


def rdb_load_seeds(out):
    n = 0
    fixtures = os.path.join(ROOT, "tests", "fixtures")
    for f in sorted(os.listdir(fixtures)):
        if not f.endswith(".rdb"):
            continue
        data = open(os.path.join(fixtures, f), "rb").read()
        for encver in range(1, 8):
            pat = b"\x81" + type_id("xs-stream", encver).to_bytes(8, "big")
            at = data.find(pat)
            while at >= 0:
                seed = bytes([encver]) + data[at + len(pat):]
                with open(os.path.join(out, f"{f}-{encver}-{at}"), "wb") as w:
                    w.write(seed)
                n += 1
                at = data.find(pat, at + 1)
    return n


def resp(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(f):
    line = f.readline()
    t, rest = line[:1], line[1:-2]
    if t in (b"+", b"-", b":"):
        return rest
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if t == b"*":
        return [read_reply(f) for _ in range(int(rest))]
    raise RuntimeError(f"reply {line!r}")


def native_dump_seeds(out):
    server = os.environ.get("XSTREAM_REDIS_SERVER") or shutil.which("redis-server")
    if not server:
        print("seeds.py: no redis-server: native_dump gets no seeds", file=sys.stderr)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                sock = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.02)
        f = sock.makefile("rb")

        def cmd(*a):
            sock.sendall(resp(a))
            return read_reply(f)

        cmd("CONFIG", "SET", "stream-node-max-entries", "5")
        for i in range(1, 31):
            fields = ["f", f"v{i}", "n", str(i)] if i % 4 else ["other", "x" * (i * 3)]
            cmd("XADD", "s", f"{i}-{i % 3}", *fields)
        cmd("XDEL", "s", "4-1", "10-1", "11-2")
        cmd("XADD", "e", "1-1", "a", "b")
        cmd("XDEL", "e", "1-1")
        cmd("XADD", "one", "5-5", "k", "v")
        cmd("COPY", "s", "g")
        cmd("XGROUP", "CREATE", "g", "g1", "0")
        cmd("XGROUP", "CREATE", "g", "g2", "$")
        cmd("XGROUP", "CREATECONSUMER", "g", "g1", "idle")
        cmd("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "7", "STREAMS", "g", ">")
        cmd("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "5", "STREAMS", "g", ">")
        cmd("XCLAIM", "g", "g1", "bob", "0", "3-0", "TIME", "1700000000000", "RETRYCOUNT", "9")
        cmd("XACK", "g", "g1", "1-1", "2-2")
        cmd("XDEL", "g", "5-2")
        n = 0
        for k in ["s", "e", "one", "g"]:
            payload = cmd("DUMP", k)
            with open(os.path.join(out, f"dump-{k}"), "wb") as w:
                w.write(payload[:-8])
            n += 1
        sock.close()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return n


def main():
    for target, fill in [("rdb_load", rdb_load_seeds), ("native_dump", native_dump_seeds)]:
        out = os.path.join(ROOT, "fuzz", "corpus", target)
        os.makedirs(out, exist_ok=True)
        print(f"seeds.py: {target}: {fill(out)} seeds in {out}")


if __name__ == "__main__":
    main()
