"""free_port() for every benchmark, and the server start-up of the redis-py ones (delayed.py, retention_timer.py, instr_cmp.py).

    with redis_server(server, module, extra=[...], wrapper=[...]) as (r, proc, dir):
        ...

starts `server --port <free> --save "" --appendonly no --dir <temp> --loadmodule <module> extra...`
(optionally under `wrapper`, e.g. valgrind), waits for PING, and on exit shuts down our own
server only and removes the directory.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time


def wait_tier_idle(info, budget=0, field="xstream_tier_resident_queued_bytes", timeout_s=120.0, poll_s=0.2):
    """Waits until the tiering step has caught up: `field` of INFO xstream at or below `budget`
    (the bytes of sealed nodes still queued in RAM against `xstream.tier-memory`, or
    `xstream_tier_resident_queued_nodes` against 0 when every sealed node goes to disk).
    `info(section)` is the client's INFO call (redis-py's or xbench's: either gives a dict).
    Raises after `timeout_s`."""
    deadline = time.time() + timeout_s
    while int(info("xstream").get(field, 0)) > budget:
        if time.time() > deadline:
            raise RuntimeError(f"tiering not idle after {timeout_s:.0f} s ({field} > {budget})")
        time.sleep(poll_s)


def free_port():
    """A free local port, never 6379 (the user's own server)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p != 6379:
            return p


@contextlib.contextmanager
def redis_server(server, module, extra=(), wrapper=(), prefix="xstream-bench-", start_timeout_s=10.0):
    import redis  # redis-py: only the scripts that use this function need it installed

    d = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    # The server's own output (and a wrapper's, valgrind's), for when it does not start.
    log = open(os.path.join(d, "server.log"), "wb")
    p = subprocess.Popen([*wrapper, server, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", d,
                          "--loadmodule", module, *extra], stdout=log, stderr=subprocess.STDOUT)
    r = redis.Redis(port=port)
    deadline = time.time() + start_timeout_s
    while True:
        try:
            r.ping()
            break
        except redis.exceptions.ConnectionError:
            if p.poll() is not None or time.time() > deadline:
                p.kill()
                p.wait()
                raise RuntimeError(f"{server} did not answer PING on port {port} (dir {d})")
            time.sleep(0.1)
    try:
        yield r, p, d
    finally:
        try:
            r.shutdown(nosave=True)
        except redis.exceptions.RedisError:
            pass
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)
