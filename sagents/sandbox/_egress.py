"""The egress proxy of sandboxes with network (docs/sandbox.md, "The network").

A ``local`` sandbox made with network gets a network namespace of its own, like every other
sandbox: its only interface is its own loopback, so the host's loopback services, the gateway's
ports and the host's abstract Unix sockets are not there at all. Its one way out is this proxy,
run by the host process for each process tree: an HTTP proxy (``CONNECT`` tunnels and plain
``http://`` requests) listening on a Unix socket that is bound into the sandbox at
:data:`EGRESS_SOCKET_PATH`, where a small forwarder (:mod:`sagents.sandbox._egress_guest`)
offers it on ``127.0.0.1`` of the sandbox's namespace and names it in ``HTTP_PROXY`` /
``HTTPS_PROXY`` / ``ALL_PROXY``. The same bridge as Anthropic's sandbox-runtime, without socat.

Every request is checked against the sandbox's :class:`NetworkPolicy` with ``web_fetch``'s
address rules (:mod:`sagents.sandbox._addresses`): the host name is resolved once by the proxy,
every address of the answer is checked, and the connection goes to the checked address (a
second DNS answer never reaches a socket). A port this host process listens on (the gateway's
``/mcp``, its console, ``/metrics``) is refused whatever the allowlist says; the connection is
closed before any byte is sent. A refusal answers ``403`` whose reason phrase and body say why
(HTTP clients show the phrase: Python's ``Tunnel connection failed: 403 ...``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import shutil
import socket
import struct
import tempfile
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from sagents.sandbox._addresses import IPAddress, Resolver, parse_address, system_resolver
from sagents.sandbox._network import HOST_NAME, NetworkPolicy

__all__ = ["EGRESS_SOCKET_PATH", "GUEST_SOURCE", "egress_proxy", "guest_argv", "own_listeners"]

logger = logging.getLogger(__name__)

EGRESS_SOCKET_PATH = "/run/sagents/egress.sock"  # where the proxy's socket appears inside
GUEST_SOURCE = (Path(__file__).parent / "_egress_guest.py").read_text(encoding="utf-8")
"""The forwarder run inside (``python -I -S -c GUEST_SOURCE SOCKET PROGRAM ARGV...``)."""
MAX_HEAD_BYTES = 16 * 1024  # request line and headers of one request
HEAD_TIMEOUT_SECONDS = 30.0  # for the request head to arrive
CONNECT_TIMEOUT_SECONDS = 30.0  # resolving and connecting to the destination
MAX_CONNECTIONS = 128  # open connections of one process tree through the proxy
CLOSE_GRACE_SECONDS = 5.0  # for the connections to end once the proxy shut them
_CHUNK = 65536
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate"}
)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# -- the ports of this process --------------------------------------------------------------


def _proc_address(text: str) -> IPAddress:
    """An address of ``/proc/net/tcp*``: 32-bit words in the host's byte order."""
    words = [int(text[i : i + 8], 16) for i in range(0, len(text), 8)]
    return ipaddress.ip_address(b"".join(struct.pack("=I", word) for word in words))


def own_listeners() -> list[tuple[IPAddress, int]]:
    """``(address, port)`` of every TCP socket this process listens on (Linux ``/proc``)."""
    inodes: set[str] = set()
    for name in os.listdir("/proc/self/fd"):
        with suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{name}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found: list[tuple[IPAddress, int]] = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.append((_proc_address(address), int(port, 16)))
    return found


def _is_own_port(address: IPAddress, port: int, local: IPAddress) -> bool:
    """Whether a connection to ``address:port`` (made from ``local``) reached this process."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    on_this_host = address.is_loopback or address == local
    for listening, listening_port in own_listeners():
        if listening_port != port:
            continue
        if isinstance(listening, ipaddress.IPv6Address) and listening.ipv4_mapped is not None:
            listening = listening.ipv4_mapped
        if listening == address or (listening.is_unspecified and on_this_host):
            return True
    return False


# -- the proxy -------------------------------------------------------------------------------


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, kw_only=True)
class _Request:
    method: str
    host: str
    port: int
    literal: bool
    head: bytes  # what goes to the destination first (empty for CONNECT)

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _host(text: str | None) -> tuple[str, bool]:
    """A request's host, lower case, and whether it is an address literal."""
    host = (text or "").lower().rstrip(".")
    try:
        parse_address(host)
    except ValueError:
        if not HOST_NAME.match(host):
            why = f"refused a request for {text!r}: not a host name or an address"
            raise _Refused(400, why) from None
        return host, False
    return host, True


def _parse_request(head: bytes) -> _Request:
    """Parse a request head (without its final empty line)."""
    try:
        lines = head.decode("ascii").split("\r\n")
    except UnicodeDecodeError:
        raise _Refused(400, "refused a request whose head is not ASCII") from None
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise _Refused(400, f"refused a malformed request line {lines[0][:200]!r}")
    method, target, version = parts
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.match(name):
            raise _Refused(400, f"refused a malformed header line {line[:200]!r}")
        headers.append((name, value.strip()))
    if method == "CONNECT":
        split = urllib.parse.urlsplit("//" + target)
        try:
            port = split.port
        except ValueError:
            port = None
        if port is None or split.path or split.username is not None:
            raise _Refused(400, f"refused CONNECT {target[:200]!r}: it needs host:port")
        host, literal = _host(split.hostname)
        return _Request(method=method, host=host, port=port, literal=literal, head=b"")
    split = urllib.parse.urlsplit(target)
    if split.scheme != "http" or not split.hostname:
        raise _Refused(
            400,
            f"refused {target[:200]!r}: a request names an http:// URL; https goes through CONNECT",
        )
    try:
        port = split.port or 80
    except ValueError:
        raise _Refused(400, f"refused {target[:200]!r}: a bad port") from None
    host, literal = _host(split.hostname)
    origin = (split.path or "/") + (f"?{split.query}" if split.query else "")
    kept = [(n, v) for n, v in headers if n.lower() not in _HOP_BY_HOP]
    if not any(n.lower() == "host" for n, _ in kept):
        kept.insert(0, ("Host", split.netloc.rpartition("@")[2]))
    # One request per connection: the next may name another host, so it needs a new one.
    text = f"{method} {origin} {version}\r\n"
    text += "".join(f"{n}: {v}\r\n" for n, v in kept) + "Connection: close\r\n\r\n"
    return _Request(method=method, host=host, port=port, literal=literal, head=text.encode())


async def _receive_head(client: anyio.abc.SocketStream) -> bytes:
    """Bytes up to and past the end of the request head, or fewer when the client stopped
    (end of file) or sent more than :data:`MAX_HEAD_BYTES` without ending it."""
    buffer = b""
    while b"\r\n\r\n" not in buffer and len(buffer) <= MAX_HEAD_BYTES:
        try:
            buffer += await client.receive(_CHUNK)
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            break
    return buffer


def _split_head(buffer: bytes) -> tuple[bytes, bytes] | None:
    """The request head and the bytes after it; None when the client left before its end.

    Raises:
        _Refused: a head over :data:`MAX_HEAD_BYTES`.
    """
    head, end, rest = buffer.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise _Refused(431, f"refused a request head over {MAX_HEAD_BYTES} bytes")
    return (head, rest) if end else None


def _printable(text: str) -> str:
    return "".join(c if " " <= c <= "~" else "?" for c in text)[:400]


async def _answer(client: anyio.abc.SocketStream, status: int, message: str) -> None:
    message = f"sagents egress proxy {message}"
    body = (message + "\n").encode()
    head = (
        f"HTTP/1.1 {status} {_printable(message)}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await client.send(head.encode() + body)


async def _shut_after(seconds: float, sock: socket.socket) -> None:
    await anyio.sleep(seconds)
    _shut(sock)


async def _copy(source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream) -> None:
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
        async for chunk in source:
            await sink.send(chunk)
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await sink.send_eof()


def _raw(stream: anyio.abc.SocketStream) -> socket.socket:
    return stream.extra(SocketAttribute.raw_socket)


def _shut(sock: socket.socket) -> None:
    """End both directions of ``sock``: a read pending on it returns end of file.

    Connections end this way rather than by cancelling their reads: anyio's Unix socket streams
    on asyncio may raise ``InvalidStateError`` when a pending read is cancelled just as data
    arrives (a known anyio bug, unfixed in 4.16).
    """
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Proxy:
    def __init__(self, policy: NetworkPolicy, resolver: Resolver, label: str) -> None:
        self._policy = policy
        self._resolver = resolver
        self._label = label
        self._open: set[socket.socket] = set()  # the raw sockets of every open connection
        self._connections = 0
        self.idle = anyio.Event()
        self.idle.set()

    def shut_down(self) -> None:
        """End every open connection (their reads return end of file)."""
        for sock in list(self._open):
            _shut(sock)

    async def handle(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            if self._connections >= 2 * MAX_CONNECTIONS:
                return  # not even an answer: each waiting head costs the host a descriptor
            if self._connections == 0:
                self.idle = anyio.Event()
            self._connections += 1
            self._open.add(_raw(client))
            try:
                await self._serve(client)
            except _Refused as refused:
                logger.warning("egress proxy of %s: %s", self._label, refused.message)
                await _answer(client, refused.status, refused.message)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as error:
                logger.info("egress proxy of %s: a connection failed: %s", self._label, error)
            except Exception:
                # the one boundary of a proxied connection: its failure is that connection's,
                # the proxy (and the process tree behind it) keeps running
                logger.exception("egress proxy of %s: a connection failed", self._label)
            finally:
                self._open.discard(_raw(client))
                self._connections -= 1
                if self._connections == 0:
                    self.idle.set()

    async def _serve(self, client: anyio.abc.SocketStream) -> None:
        async with anyio.create_task_group() as tg:
            # a head that does not arrive in time: the connection is shut, not its read cancelled
            tg.start_soon(_shut_after, HEAD_TIMEOUT_SECONDS, _raw(client))
            buffer = await _receive_head(client)
            tg.cancel_scope.cancel()
        got = _split_head(buffer)
        if got is None:
            return
        if self._connections > MAX_CONNECTIONS:  # answered once its head is read: no reset
            raise _Refused(503, f"refused a connection: over {MAX_CONNECTIONS} at once")
        head, rest = got
        request = _parse_request(head)
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                upstream = await self._connect(request)
        except TimeoutError:
            raise _Refused(504, f"timed out connecting to {request.target}") from None
        self._open.add(_raw(upstream))
        try:
            async with upstream:
                if request.method == "CONNECT":
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if request.head or rest:
                    await upstream.send(request.head + rest)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_copy, client, upstream)
                    tg.start_soon(_copy, upstream, client)
        finally:
            self._open.discard(_raw(upstream))

    async def _connect(self, request: _Request) -> anyio.abc.SocketStream:
        """Resolve once, check every address, connect to the first, check it is not ours."""
        policy, host, port = self._policy, request.host, request.port
        refused = f"refused {request.target}"
        if request.literal:
            addresses = [parse_address(host)]
        elif not policy.names_permit(host, port) and not policy.lists_networks(port):
            raise _Refused(403, f"{refused}: not in network.allow {list(policy.allow)!r}")
        else:
            try:
                addresses = [parse_address(a) for a in await self._resolver(host, port)]
            except (OSError, ValueError) as error:
                raise _Refused(502, f"cannot resolve {host!r}: {error}") from None
            if not addresses:
                raise _Refused(502, f"{host!r} has no address")
        for address in addresses:
            why = policy.refusal(host, port, address, literal=request.literal)
            if why is not None:
                raise _Refused(403, f"{refused}: {why}")
        try:
            upstream = await anyio.connect_tcp(str(addresses[0]), port)
        except OSError as error:
            raise _Refused(502, f"cannot connect to {request.target}: {error}") from None
        local = parse_address(str(upstream.extra(SocketAttribute.local_address)[0]))
        # The peer reached, not the address written: a connection to 0.0.0.0 (or ::) reaches
        # this host's loopback.
        reached = parse_address(str(upstream.extra(SocketAttribute.remote_address)[0]))
        own = await anyio.to_thread.run_sync(_is_own_port, reached, port, local)
        if own:
            await upstream.aclose()  # before any byte was sent
            raise _Refused(
                403,
                f"{refused}: it is a port of the gateway (this host process) itself, which no "
                "sandbox may reach, listed or not",
            )
        return upstream


@asynccontextmanager
async def egress_proxy(
    policy: NetworkPolicy, *, label: str, resolver: Resolver = system_resolver
) -> AsyncIterator[str]:
    """Run the egress proxy of one process tree; yield the host path of its Unix socket.

    The socket lives in a fresh directory of mode 0700 (nothing else on the host reaches it)
    and is itself writable by everyone, so that the sandbox's unprivileged uid can connect
    through the bind. Leaving the context closes the proxy and every connection through it.

    Args:
        policy: What the tree may reach.
        label: Names the sandbox in the log (``MCP server 'fleet'``).
        resolver: ``(host, port) -> addresses`` (the system's by default).
    """
    directory = tempfile.mkdtemp(prefix="sagents-egress-")
    path = os.path.join(directory, "proxy.sock")
    proxy = _Proxy(policy, resolver, label)
    try:
        listener = await anyio.create_unix_listener(path, mode=0o666)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, proxy.handle)
            try:
                yield path
            finally:
                proxy.shut_down()
                with anyio.move_on_after(CLOSE_GRACE_SECONDS, shield=True):
                    await proxy.idle.wait()
                tg.cancel_scope.cancel()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def guest_argv(
    python: str, argv: Sequence[str], forwards: Sequence[tuple[str, int]] = ()
) -> list[str]:
    """The command line that runs ``argv`` behind the forwarder inside the sandbox, which
    also listens at each ``(loopback address, port)`` of ``forwards`` and tunnels what
    connects there to the same address through the proxy."""
    listed = ",".join(
        f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in forwards
    )
    return [python, "-I", "-S", "-c", GUEST_SOURCE, EGRESS_SOCKET_PATH, listed, argv[0], *argv]
