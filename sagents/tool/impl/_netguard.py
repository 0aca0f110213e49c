"""The address guard of ``web_fetch``: which hosts and addresses a fetch may reach, and an
``httpcore`` network backend that dials only the address it checked (docs/builtin_tools.md).

SSRF-safe by construction: a connection's host name is resolved once, *every* address of the
answer is checked, and the socket connects to the checked address itself, while the HTTP layer
above keeps the original name for the ``Host`` header and the TLS server name (SNI, certificate
check). A second DNS answer (rebinding) never reaches a socket, because nothing else resolves.

Refused by default: every address that is not globally routable (loopback, RFC 1918 private,
link-local, CGNAT ``100.64.0.0/10``, unique-local ``fc00::/7``, unspecified, reserved,
documentation ranges, multicast), the cloud metadata addresses, and every IPv4-mapped or
IPv4-embedding IPv6 form (``::ffff:a.b.c.d``, ``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4
``2002::/16``, Teredo ``2001::/32``), whatever they embed. A host name is resolved by the
system resolver, which also turns the legacy literal notations (``2130706433``,
``0x7f.1``, ``0177.0.0.1``, ``127.1``) into the address that is then checked.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpcore2

from sagents.errors import UrlNotAllowedError

__all__ = [
    "METADATA_ADDRESSES",
    "AddressGuard",
    "PinnedBackend",
    "Resolver",
    "domain_matches",
    "refusal_reason",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: how a host name becomes addresses (the system's by default;
tests pass their own to play DNS rebinding)."""

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack instance metadata
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server (a public address)
    )
)

_EMBEDDING_V6 = (
    ipaddress.ip_network("::ffff:0:0/96"),  # IPv4-mapped
    ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated)
    ipaddress.ip_network("64:ff9b::/96"),  # NAT64
    ipaddress.ip_network("64:ff9b:1::/48"),  # local-use NAT64
    ipaddress.ip_network("2002::/16"),  # 6to4
    ipaddress.ip_network("2001::/32"),  # Teredo
)


def refusal_reason(address: IPAddress) -> str | None:
    """Why ``address`` is refused by default (a short phrase), or None when it is public."""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return "an IPv4-mapped IPv6 address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if isinstance(address, ipaddress.IPv6Address) and any(
        address in network for network in _EMBEDDING_V6
    ):
        return "an IPv6 address that embeds an IPv4 address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a carrier-grade NAT address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved (not globally routable) address"
    return None


_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def domain_matches(host: str, domains: Iterable[str]) -> bool:
    """True when ``host`` is one of ``domains`` or a subdomain of one (case-insensitive;
    a leading ``*.`` or ``.`` on a domain means the same)."""
    host = host.lower().rstrip(".")
    for domain in domains:
        domain = domain.lower().strip().removeprefix("*.").lstrip(".").rstrip(".")
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The system resolver (``getaddrinfo``, TCP), addresses in its order."""
    answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in answers]


def _parse(text: str) -> IPAddress:
    return ipaddress.ip_address(text.split("%", 1)[0])  # drop an IPv6 zone id


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
            address = _parse(answer)
            reason = self.allowed(host, address)
            if reason is not None:
                raise UrlNotAllowedError(
                    f"host {host!r} resolves to {str(address)!r}, {reason}; web_fetch only "
                    "reaches public addresses",
                    hint="the operator may allow it with builtinTools.webFetch.allowNetworks "
                    "or allowHosts",
                    details={"host": host, "address": str(address), "reason": reason},
                )
        chosen = str(_parse(answers[0]))
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
