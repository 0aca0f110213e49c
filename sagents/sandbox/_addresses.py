"""Which addresses count as public: the address rules shared by ``web_fetch``
(docs/builtin_tools.md) and the egress proxy of sandboxes with network (docs/sandbox.md,
"The network").

Refused by default: every address that is not globally routable (loopback, RFC 1918 private,
link-local, CGNAT ``100.64.0.0/10``, unique-local ``fc00::/7``, unspecified, reserved,
documentation ranges, multicast), the cloud metadata addresses, and every IPv4-mapped or
IPv4-embedding IPv6 form (``::ffff:a.b.c.d``, ``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4
``2002::/16``, Teredo ``2001::/32``), whatever they embed. A host name is resolved once by the
system resolver (which also turns the legacy literal notations ``2130706433``, ``0x7f.1``,
``0177.0.0.1``, ``127.1`` into the address that is then checked), and the connection goes to
the checked address itself.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence

import anyio

__all__ = [
    "METADATA_ADDRESSES",
    "IPAddress",
    "Resolver",
    "parse_address",
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


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The system resolver (``getaddrinfo``, TCP), addresses in its order."""
    answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in answers]


def parse_address(text: str) -> IPAddress:
    """The address ``text`` names (an IPv6 zone id dropped).

    Raises:
        ValueError: ``text`` is not an address.
    """
    return ipaddress.ip_address(text.split("%", 1)[0])
