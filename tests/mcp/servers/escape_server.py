"""A stdlib-only stdio MCP server (protocol 2025-06-18) that tries to get out of its sandbox.

Each tool tries one thing the escape suite (tests/sandbox/test_escape.py) tries and answers
what happened as text (``ERROR <reason>`` when the attempt failed): ``read``, ``write``,
``connect`` (a raw TCP connection), ``fetch`` (an HTTP GET of ``url`` through the proxy its
environment names, as any HTTP client does), ``vsock`` (create an ``AF_VSOCK`` socket),
``connect_unix`` (an abstract Unix socket), ``unix_pair`` (one of its own),
``environ``, ``orphan`` (a grandchild in a session of its own), ``fork`` (up to ``n``
children), ``allocate`` (``mb`` MiB), ``setuid`` (a set-user-ID file), ``userns`` (a new user
namespace), ``sysctl`` (write ``kernel.core_pattern``), ``fds``, ``pids``, ``whoami``,
``junk`` (``n`` bytes on stdout without a newline), ``spew`` (``n`` bytes on stderr),
``noise`` (``n`` non-JSON stdout lines).
A test fixture, not library code.
"""

import ctypes
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any


def _read(args: dict[str, str]) -> str:
    with open(args["path"], encoding="utf-8", errors="replace") as file:
        return file.read()


def _write(args: dict[str, str]) -> str:
    with open(args["path"], "w", encoding="utf-8") as file:
        file.write(args.get("text", "pwned"))
    return "WROTE"


def _connect(args: dict[str, object]) -> str:
    with socket.create_connection((str(args["host"]), int(str(args["port"]))), timeout=3):
        return "CONNECTED"


def _fetch(args: dict[str, object]) -> str:
    """GET ``url``; an HTTP error answers ``HTTP <status> <reason>``, a refused tunnel the
    client's own error."""
    try:
        with urllib.request.urlopen(str(args["url"]), timeout=10) as response:
            return f"HTTP {response.status} {response.read().decode(errors='replace')}"
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code} {error.reason} {error.read().decode(errors='replace')}"


def _vsock(args: dict[str, object]) -> str:
    socket.socket(40, socket.SOCK_STREAM).close()  # AF_VSOCK
    return "CREATED"


def _connect_unix(args: dict[str, object]) -> str:
    """Connect to the abstract Unix socket ``\\0<name>``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        sock.connect("\0" + str(args["name"]))
        return "CONNECTED"


def _unix_pair(args: dict[str, object]) -> str:
    """Listen on an abstract Unix socket of its own and connect to it."""
    name = f"\0sagents-own-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)
        listener.listen()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(name)
            listener.accept()[0].close()
    return "PAIRED"


def _orphan(args: dict[str, str]) -> str:
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", args["marker"]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return "STARTED"


def _fork(args: dict[str, object]) -> str:
    started = 0
    try:
        for _ in range(int(str(args.get("n", 200)))):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            started += 1
    except OSError as error:
        return f"STARTED {started} ERROR {error.errno}"
    return f"STARTED {started}"


def _allocate(args: dict[str, object]) -> str:
    chunks = [bytearray(1024 * 1024) for _ in range(int(str(args["mb"])))]
    return f"ALLOCATED {len(chunks)}"


def _setuid(args: dict[str, object]) -> str:
    path = "/tmp/suid"
    with open(path, "w") as file:
        file.write("#!/bin/sh\n")
    os.chmod(path, 0o4755)
    return "SETUID"


def _userns(args: dict[str, object]) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "UNSHARED"


def _sysctl(args: dict[str, object]) -> str:
    with open("/proc/sys/kernel/core_pattern", "w") as file:
        file.write("|/tmp/x")
    return "WROTE"


def _fds(args: dict[str, object]) -> str:
    return json.dumps(sorted(int(fd) for fd in os.listdir("/proc/self/fd")))


def _pids(args: dict[str, object]) -> str:
    return json.dumps(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))


def _whoami(args: dict[str, object]) -> str:
    return json.dumps({"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()})


def _environ(args: dict[str, object]) -> str:
    return json.dumps(dict(os.environ))


def _junk(args: dict[str, object]) -> str:
    """``n`` bytes on stdout in chunks, with no newline until the end."""
    left = int(str(args["n"]))
    while left > 0:
        sys.stdout.write("x" * min(left, 65536))
        left -= 65536
    sys.stdout.write("\n")
    sys.stdout.flush()
    return "JUNKED"


def _spew(args: dict[str, object]) -> str:
    """``n`` bytes of lines on stderr."""
    line = "spew " * 19 + "\n"
    for _ in range(int(str(args["n"])) // len(line)):
        sys.stderr.write(line)
    sys.stderr.flush()
    return "SPEWED"


def _noise(args: dict[str, object]) -> str:
    """``n`` short lines on stdout that are not JSON-RPC."""
    for _ in range(int(str(args["n"]))):
        sys.stdout.write("noise\n")
    sys.stdout.flush()
    return "NOISED"


TOOLS: dict[str, Callable[[Any], str]] = {
    "noise": _noise,
    "junk": _junk,
    "spew": _spew,
    "read": _read,
    "write": _write,
    "connect": _connect,
    "fetch": _fetch,
    "vsock": _vsock,
    "connect_unix": _connect_unix,
    "unix_pair": _unix_pair,
    "orphan": _orphan,
    "fork": _fork,
    "allocate": _allocate,
    "setuid": _setuid,
    "userns": _userns,
    "sysctl": _sysctl,
    "fds": _fds,
    "pids": _pids,
    "whoami": _whoami,
    "environ": _environ,
}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "initialize":
        result: dict[str, object] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "escape", "version": "0.0.1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {"name": name, "inputSchema": {"type": "object"}, "annotations": {}}
                for name in TOOLS
            ]
        }
    elif method == "tools/call":
        params = request["params"]
        try:
            text = TOOLS[params["name"]](params.get("arguments") or {})
        except (OSError, MemoryError, KeyError, ValueError) as error:
            text = f"ERROR {type(error).__name__}: {error}"
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        continue  # notifications and unknown requests (server/discover) are ignored
    send({"jsonrpc": "2.0", "id": rid, "result": result})
