"""The in-sandbox end of the egress bridge (stdlib only; docs/sandbox.md, "The network").

A sandbox with network has a network namespace of its own whose only interface is its
loopback; the host's egress proxy listens on a Unix socket bound into the sandbox. This
program, run by the sandbox's Python as
``python -I -S -c SOURCE SOCKET FORWARDS PROGRAM ARGV0 ARGS...`` (the source of this file is
passed with ``-c``, so that nothing more is bound inside), listens on ``127.0.0.1:<free port>``
in the sandbox's namespace, starts the program with ``HTTP_PROXY``, ``HTTPS_PROXY`` and
``ALL_PROXY`` (both spellings) naming that port, copies every connection to the Unix socket
byte for byte, and exits with the program's status (dying of the same signal).

``FORWARDS`` (comma-separated ``127.0.0.1:5432`` or ``[::1]:6379``, possibly empty) are the
loopback ports the allowlist names: the forwarder listens at each of them too and sends what
connects there on through the proxy with ``CONNECT`` to the same address, for clients that
speak no proxy protocol (PostgreSQL's, Redis's). A refused tunnel is closed before any byte,
and the proxy's reason is written to standard error. The proxy on the host decides what each
connection may reach.
"""

import contextlib
import os
import signal
import socket
import sys
import threading

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_CHUNK = 65536  # bytes per read
_HEAD_LIMIT = 16384  # the proxy's answer head, at most


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until end of file, then half-close ``sink``."""
    with contextlib.suppress(OSError):  # the other side went away: the connection ends
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _bridge(client: socket.socket, path: str) -> None:
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(path)
        except OSError as error:
            sys.stderr.write(f"sagents egress bridge: cannot reach the proxy: {error}\n")
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def _tunnel(client: socket.socket, path: str, target: str) -> None:
    """Ask the proxy for a ``CONNECT`` tunnel to ``target``, then copy both ways."""
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(path)
            upstream.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head and len(head) < _HEAD_LIMIT:
                chunk = upstream.recv(_CHUNK)
                if not chunk:
                    break
                head += chunk
        except OSError as error:
            sys.stderr.write(f"sagents egress bridge: {target}: cannot reach the proxy: {error}\n")
            return
        status, _, rest = head.partition(b"\r\n\r\n")
        line = status.split(b"\r\n", 1)[0].decode(errors="replace")
        if line.split(" ")[1:2] != ["200"]:
            reason = rest.decode(errors="replace").strip() or line
            sys.stderr.write(f"sagents egress bridge: {target}: {reason}\n")
            return
        if rest:
            client.sendall(rest)
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def _serve(listener: socket.socket, path: str, target: str | None = None) -> None:
    while True:
        client, _ = listener.accept()
        if target is None:
            threading.Thread(target=_bridge, args=(client, path), daemon=True).start()
        else:
            threading.Thread(target=_tunnel, args=(client, path, target), daemon=True).start()


def _forward_listeners(forwards: str) -> list[tuple[socket.socket, str]]:
    """A listener at each ``address:port`` of ``forwards`` (one that cannot be bound, such
    as a port below 1024, is said on standard error and skipped)."""
    found = []
    for target in filter(None, forwards.split(",")):
        host, _, port = target.rpartition(":")
        family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host.strip("[]"), int(port)))
            listener.listen(128)
        except OSError as error:
            listener.close()
            sys.stderr.write(f"sagents egress bridge: cannot listen at {target}: {error}\n")
            continue
        found.append((listener, target))
    return found


def _inherited_descriptors() -> list[int]:
    """Descriptors above 2 this process was given (for the program, not for the bridge)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.fstat(fd)  # the listing's own descriptor is closed by now
            except OSError:
                continue
            found.append(fd)
    return found


def main(argv: list[str]) -> int:
    path, forwards, program, *args = argv
    inherited = _inherited_descriptors()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)  # listening before the program starts: its first request queues
    forwarded = _forward_listeners(forwards)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = dict(os.environ)
    for name in PROXY_VARIABLES:
        env[name] = env[name.lower()] = url
    try:
        pid = os.posix_spawnp(program, args, env)
    except OSError as error:
        sys.stderr.write(f"sagents: cannot start {program!r}: {error}\n")
        return 127
    for fd in inherited:
        os.close(fd)  # the program's pipes (fds 3, 4...) must not stay open through us
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # nor its stdin and stdout
    os.dup2(null, 1)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    for each, target in forwarded:
        threading.Thread(target=_serve, args=(each, path, target), daemon=True).start()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
