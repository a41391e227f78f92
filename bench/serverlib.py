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
