"""redis-cli's argument hints for XS.* commands (issue 20): redis-cli 7.2+ builds its hints from
COMMAND DOCS, so what the module documents (src/ffi/docs.rs) is what a user sees while typing.

Runs redis-cli of a 7.2+ host (env XSTREAM_CLI_HOST_DIR: the host's src/ directory with
redis-server and redis-cli; `make test-matrix` passes redis-7.2.6) in a pseudo-terminal against a
server of that host with the module, types a command name and a space, and reads the hint
redis-cli draws after the cursor (grey text, ESC[0;90;49m ... ESC[0m).
"""

import os
import fcntl
import pty
import struct
import termios
import re
import select
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULE = Path(os.environ.get("XSTREAM_MODULE") or ROOT / "target" / "dist" / "libxstream.so")
HOST = os.environ.get("XSTREAM_CLI_HOST_DIR")

pytestmark = pytest.mark.skipif(not HOST, reason="XSTREAM_CLI_HOST_DIR not set (make test-matrix sets it)")


def free_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p != 6379:
            return p


@pytest.fixture(scope="module")
def server():
    port = free_port()
    d = tempfile.mkdtemp(prefix="xstream-hints-")
    p = subprocess.Popen([f"{HOST}/redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--dir", d, "--logfile", f"{d}/redis.log", "--loadmodule", str(MODULE)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield port
    p.terminate()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)


def read(fd, seconds):
    out = b""
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            out += chunk
            # linenoise asks where the cursor is; answer row 1, column 1.
            if b"\x1b[6n" in chunk:
                os.write(fd, b"\x1b[1;1R")
    return out


def hint_for(port, command):
    pid, fd = pty.fork()
    if pid == 0:
        # A terminal 200 columns wide, so that linenoise neither asks nor wraps.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        os.environ["TERM"] = "xterm"
        os.execv(f"{HOST}/redis-cli", ["redis-cli", "-p", str(port)])
    try:
        read(fd, 1.0)
        out = b""
        for ch in command.encode() + b" ":
            os.write(fd, bytes([ch]))
            out += read(fd, 0.1)
        out += read(fd, 0.5)
        hints = re.findall(rb"\x1b\[0;90;49m(.*?)\x1b\[0m", out)
        return hints[-1].decode() if hints else None
    finally:
        os.write(fd, b"\x03")
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass


@pytest.mark.parametrize("command,expected", [
    ("XS.DELEX", "key [KEEPREF|DELREF|ACKED] IDS numids id [id ...]"),
    ("XS.ACKDEL", "key group [KEEPREF|DELREF|ACKED] IDS numids id [id ...]"),
    ("XS.IMPORT", "key"),
    ("XS.TYPE", "key"),
    ("XS.LEN", "key"),
])
def test_hint(server, command, expected):
    assert hint_for(server, command) == expected


def test_hint_read_has_the_module_options(server):
    h = hint_for(server, "XS.READ")
    assert h is not None and h.startswith("[COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK milliseconds]"), h
