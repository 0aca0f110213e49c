"""The address guard of ``web_fetch``: which hosts and addresses a fetch may reach, and an
``httpcore`` network backend that dials only the address it checked (docs/builtin_tools.md).

The address rules themselves (:func:`refusal_reason`) live in
:mod:`sagents.sandbox._addresses`, shared with the sandbox's egress proxy.

SSRF-safe by construction: a connection's host name is resolved once, *every* address of the
answer is checked, and the socket connects to the checked address itself, while the HTTP layer
above keeps the original name for the ``Host`` header and the TLS server name (SNI, certificate
check). A second DNS answer (rebinding) never reaches a socket, because nothing else resolves.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpcore2
import httpx2

from sagents.errors import UrlNotAllowedError
from sagents.sandbox._addresses import (
    METADATA_ADDRESSES,
    IPAddress,
    Resolver,
    parse_address,
    refusal_reason,
    system_resolver,
)

__all__ = [
    "METADATA_ADDRESSES",
    "AddressGuard",
    "PinnedBackend",
    "PinnedTransport",
    "Resolver",
    "domain_matches",
    "refusal_reason",
    "system_resolver",
]


def domain_matches(host: str, domains: Iterable[str]) -> bool:
    """True when ``host`` is one of ``domains`` or a subdomain of one (case-insensitive;
    a leading ``*.`` or ``.`` on a domain means the same)."""
    host = host.lower().rstrip(".")
    for domain in domains:
        domain = domain.lower().strip().removeprefix("*.").lstrip(".").rstrip(".")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


@dataclass(kw_only=True)
class AddressGuard:
    """Checks the addresses a host resolves to, and remembers each connection it allowed.

    Attributes:
        allow_networks: Networks (CIDR) allowed although refused by default, e.g.
            ``127.0.0.0/8`` for a test server or ``10.1.0.0/16`` for an intranet.
        allow_hosts: Host names whose addresses are allowed whatever they are.
        resolver: ``(host, port) -> addresses``.
        connections: ``(host, port, address)`` of every connection made, in order.
    """

    allow_networks: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    resolver: Resolver = system_resolver
    connections: list[tuple[str, int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        try:
            self._networks = [ipaddress.ip_network(n, strict=False) for n in self.allow_networks]
        except ValueError as error:
            raise ValueError(f"web_fetch allowNetworks: {error}") from error

    def allowed(self, host: str, address: IPAddress) -> str | None:
        """None when ``host`` may connect to ``address``, else why not."""
        if host.lower().rstrip(".") in {h.lower().rstrip(".") for h in self.allow_hosts}:
            return None
        if any(address.version == n.version and address in n for n in self._networks):
            return None
        return refusal_reason(address)

    async def pick(self, host: str, port: int) -> str:
        """Resolve ``host`` once, check every address, return the first.

        Raises:
            UrlNotAllowedError: when any address is refused, or the name does not resolve.
        """
        try:
            answers = list(await self.resolver(host, port))
        except OSError as error:
            raise UrlNotAllowedError(
                f"cannot resolve host {host!r}: {error}",
                hint="check the URL's host name",
                details={"host": host},
            ) from error
        if not answers:
            raise UrlNotAllowedError(f"host {host!r} has no address", details={"host": host})
        for answer in answers:
            address = parse_address(answer)
            reason = self.allowed(host, address)
            if reason is not None:
                raise UrlNotAllowedError(
                    f"host {host!r} resolves to {str(address)!r}, {reason}; web_fetch only "
                    "reaches public addresses",
                    hint="the operator may allow it with builtinTools.webFetch.allowNetworks "
                    "or allowHosts",
                    details={"host": host, "address": str(address), "reason": reason},
                )
        chosen = str(parse_address(answers[0]))
        self.connections.append((host, port, chosen))
        return chosen


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """An ``httpcore`` network backend whose TCP connections go only to addresses the
    :class:`AddressGuard` checked; everything above (HTTP, TLS with the original server
    name) is ``httpcore``'s own."""

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        address = await self._guard.pick(host, port)
        return await self._inner.connect_tcp(
            address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise UrlNotAllowedError("web_fetch never connects to a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# httpcore's errors as httpx's (the most specific first), as httpx's own transport maps them.
_ERRORS: tuple[tuple[type[Exception], type[httpx2.HTTPError]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.NetworkError, httpx2.NetworkError),
    (httpcore2.ProxyError, httpx2.ProxyError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
    (httpcore2.ProtocolError, httpx2.ProtocolError),
)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as error:
        for raised, mapped in _ERRORS:
            if isinstance(error, raised):
                raise mapped(str(error)) from error
        raise


class PinnedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx`` transport over an ``httpcore`` pool on the :class:`PinnedBackend` (httpx's
    documented seam for a custom transport: one method, ``handle_async_request``); no proxy,
    no environment.

    Args:
        guard: Which addresses a connection may reach.
        ssl_context: The TLS settings (certificate checks with the original server name).
    """

    def __init__(self, guard: AddressGuard, ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context, network_backend=PinnedBackend(guard)
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` on the pool; the response streams its body."""
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            answer = await self._pool.handle_async_request(sent)
        assert isinstance(answer.stream, AsyncIterable)
        return httpx2.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        """Close the pool's connections."""
        await self._pool.aclose()


class _Body(httpx2.AsyncByteStream):
    """A response body from ``httpcore``, its errors as ``httpx``'s."""

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        closing = getattr(self._stream, "aclose", None)
        if closing is not None:
            await closing()
