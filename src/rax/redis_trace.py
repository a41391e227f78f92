#!/usr/bin/env python3
"""Records a node-count trace from a real redis-server for the rax tests.

Replays XADD/XDEL/XSETID sequences (stream-node-max-entries 1, so each entry ID is one rax
key; XSETID lowers the last ID after the top entries were deleted so that later IDs land
between old ones) and records radix-tree-keys / radix-tree-nodes after every op.
Output lines: 'N <stream>' | 'A <hex key>' | 'D <hex key>' | 'C <keys> <nodes>'.

    redis-server --port 6391 --save '' &
    python3 src/rax/redis_trace.py 6391 /tmp/trace.txt [SEED]
    XSTREAM_RAX_GOLDEN=/tmp/trace.txt cargo test --lib golden_trace_file -- --ignored
"""
import random, socket, sys

PORT = int(sys.argv[1])
OUT = sys.argv[2]
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 1


class R:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            d = self.f.read(n + 2)[:-2]
            return d
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def cmd(self, *args):
        self.send(*args)
        return self.read()


r = R(PORT)
r.cmd("CONFIG", "SET", "stream-node-max-entries", "1")
out = open(OUT, "w")
rng = random.Random(SEED)


def key(ms, seq):
    return (ms.to_bytes(8, "big") + seq.to_bytes(8, "big")).hex()


def counts(name):
    info = r.cmd("XINFO", "STREAM", name)
    d = dict(zip(info[0::2], info[1::2]))
    return d[b"radix-tree-keys"], d[b"radix-tree-nodes"]


class Seq:
    def __init__(self, name):
        self.name = name
        self.live = []  # sorted (ms, seq)
        self.exists = False
        r.cmd("DEL", name)
        out.write("N %s\n" % name)

    def check(self):
        k, n = counts(self.name)
        assert k == len(self.live), (k, len(self.live))
        out.write("C %d %d\n" % (k, n))

    def add(self, ms, seq):
        if self.exists:
            top = self.live[-1] if self.live else (0, 0)
            # Lower the last ID if the top was deleted, so inserts land between old keys.
            r.cmd("XSETID", self.name, "%d-%d" % top)
        self.exists = True
        assert r.cmd("XADD", self.name, "%d-%d" % (ms, seq), "f", "v") == b"%d-%d" % (ms, seq)
        self.live.append((ms, seq))
        out.write("A %s\n" % key(ms, seq))
        self.check()

    def delete(self, idx):
        ms, seq = self.live.pop(idx)
        assert r.cmd("XDEL", self.name, "%d-%d" % (ms, seq)) == 1
        out.write("D %s\n" % key(ms, seq))
        self.check()


# 1: ms 1..300, then deletions.
s = Seq("s1")
for ms in range(1, 301):
    s.add(ms, 0)
for _ in range(200):
    s.delete(rng.randrange(len(s.live)))
while s.live:
    s.delete(0)

# 2: 0-1 .. 0-300, delete from the front (trim pattern) and middle.
s = Seq("s2")
for q in range(1, 301):
    s.add(0, q)
for i in range(100):
    s.delete(0)
for i in range(100):
    s.delete(rng.randrange(len(s.live)))

# 3: big ms values sharing long prefixes.
s = Seq("s3")
base = 1 << 62
for i in range(200):
    s.add(base + i * 0x10001, i % 3)
for i in range(150):
    s.delete(rng.randrange(len(s.live)))

# 4: random increasing keys with varied gaps, random deletes (incl. the top), XSETID.
for t in range(12):
    s = Seq("r%d" % t)
    cur = (0, 0)
    for step in range(800):
        if s.live and rng.random() < 0.45:
            s.delete(rng.randrange(len(s.live)))
            continue
        floor = s.live[-1] if s.live else (0, 0)
        g = rng.choice([1, 1, 2, 255, 256, 257, 65536, 1 << 24, 1 << 40, rng.getrandbits(20)])
        if rng.random() < 0.5:
            ms, seq = floor[0], floor[1] + g
        else:
            ms, seq = floor[0] + g, rng.choice([0, 0, 1, rng.getrandbits(8), rng.getrandbits(64)])
        if ms >= 1 << 64 or seq >= 1 << 64 or (ms, seq) <= floor or (ms, seq) == (0, 0):
            continue
        s.add(ms, seq)
    while s.live:
        s.delete(rng.randrange(len(s.live)))
out.close()
print("ok")
