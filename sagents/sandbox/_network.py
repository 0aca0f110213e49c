"""Where a sandbox with network may connect: :class:`NetworkPolicy`, a plain value (its
allowlist is checked when it is made), and the decision for one destination (docs/sandbox.md,
"The network"). The egress proxy (:mod:`sagents.sandbox._egress`) applies it.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from sagents.sandbox._addresses import IPAddress, refusal_reason

__all__ = ["ANY_PUBLIC_HOST", "HOST_NAME", "NetworkPolicy", "network_policy"]

ANY_PUBLIC_HOST = "*"
"""The allowlist entry that ``network: true`` stands for: any public host, any port."""
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
HOST_NAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\Z")
_CHANGED = (
    "a sandbox with network reaches only public hosts: 'network: true' no longer reaches "
    "loopback, link-local, private or cloud metadata addresses"
)


@dataclass(frozen=True)
class _Rule:
    kind: Literal["any", "name", "suffix", "network"]
    name: str = ""
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None

    def port_matches(self, port: int) -> bool:
        return self.port is None or self.port == port


def _entry_error(entry: str, why: str = "") -> ValueError:
    shape = (
        "a host name, '*.domain', '*', an address or a network (CIDR), optionally with ':port' "
        "(an IPv6 address in brackets: '[::1]:8080')"
    )
    return ValueError(f"network allow entry {entry!r} {why or 'is not ' + shape}")


def _parse_port(entry: str, text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise _entry_error(entry, f"has port {text!r}: a port is 1 to 65535")
    return int(text)


def _parse_rule(entry: str) -> _Rule:
    """One allowlist entry as a rule.

    Raises:
        ValueError: the entry is none of the accepted shapes; the message names it.
    """
    if not isinstance(entry, str) or entry != entry.strip() or not entry:
        raise _entry_error(str(entry))
    text = entry.lower()
    if "://" in text:
        raise _entry_error(entry, "is a URL: write its host only, with ':port' if needed")
    port: int | None = None
    bracketed = text.startswith("[")
    if bracketed:
        host, close, rest = text[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            raise _entry_error(entry)
        if rest:
            port = _parse_port(entry, rest[1:])
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        port = _parse_port(entry, port_text)
    else:
        host = text  # a name, or an IPv6 address or network without a port
    if host == ANY_PUBLIC_HOST:
        return _Rule("any", port=port)
    try:
        network = ipaddress.ip_network(host, strict=True)
    except ValueError as error:
        if "/" in host or bracketed or ":" in host:
            raise _entry_error(entry, f"is not a network: {error}") from None
    else:
        return _Rule("network", network=network, port=port)
    if host.startswith("*.") and HOST_NAME.match(host[2:]):
        return _Rule("suffix", name=host[2:], port=port)
    if HOST_NAME.match(host) and not all(label.isdigit() for label in host.split(".")):
        return _Rule("name", name=host.rstrip("."), port=port)
    raise _entry_error(entry)


@dataclass(frozen=True, kw_only=True)
class NetworkPolicy:
    """Where a sandbox with network may connect, through the egress proxy.

    Each entry of ``allow`` is one of (docs/sandbox.md, "The network"):

    - ``"*"``: any **public** host (what ``network=True`` means);
    - a host name (``"api.github.com"``) or ``"*.example.org"`` (its subdomains, not itself):
      that name, whose addresses must all be public;
    - an address or a network (``"127.0.0.1"``, ``"10.1.0.0/16"``, ``"[::1]"``): connections
      to addresses in it, private, loopback or link-local included, whatever name led there;

    each optionally with ``":port"`` (``"127.0.0.1:5432"``); without one, every port. A name
    that resolves to a non-public address is refused unless that address is listed too. The
    ports this host process listens on are refused whatever is listed.

    Raises:
        ValueError: an entry of none of these shapes (the message names it), or no entry.
    """

    allow: tuple[str, ...] = (ANY_PUBLIC_HOST,)

    def __post_init__(self) -> None:
        if isinstance(self.allow, str):
            raise ValueError(f"network allow must be a list of entries, got {self.allow!r}")
        if not self.allow:
            raise ValueError("network allow is empty: list a destination, or turn the network off")
        for entry in self.allow:
            _parse_rule(entry)

    @functools.cached_property
    def _rules(self) -> tuple[_Rule, ...]:
        return tuple(_parse_rule(entry) for entry in self.allow)

    def names_permit(self, host: str, port: int) -> bool:
        """Whether an entry lets the name ``host`` (or ``*``) be asked for on ``port``."""
        for rule in self._rules:
            if not rule.port_matches(port):
                continue
            if rule.kind == "any":
                return True
            if rule.kind == "name" and host == rule.name:
                return True
            if rule.kind == "suffix" and host.endswith("." + rule.name):
                return True
        return False

    def loopback_ports(self) -> tuple[tuple[str, int], ...]:
        """The ``(address, port)`` of each entry naming one loopback address with a port
        (``"127.0.0.1:5432"``, ``"[::1]:6379"``): the forwarder inside listens there, so that a
        client that speaks no proxy protocol reaches it at its own address."""
        found: list[tuple[str, int]] = []
        for rule in self._rules:
            network = rule.network
            if (
                network is not None
                and rule.port is not None
                and network.num_addresses == 1
                and network.network_address.is_loopback
            ):
                found.append((str(network.network_address), rule.port))
        return tuple(dict.fromkeys(found))

    def lists_networks(self, port: int) -> bool:
        """Whether an address or network entry applies to ``port``."""
        return any(r.kind == "network" and r.port_matches(port) for r in self._rules)

    def refusal(self, host: str, port: int, address: IPAddress, *, literal: bool) -> str | None:
        """Why a connection to ``address`` (``host`` resolved, or given as ``literal``) on
        ``port`` is refused, or None when it is allowed."""
        for rule in self._rules:
            network = rule.network
            if (
                network is not None
                and rule.port_matches(port)
                and address.version == network.version
                and address in network
            ):
                return None
        reason = refusal_reason(address)
        if reason is not None:
            where = f"{str(address)!r} is" if literal else f"{host!r} resolves to {str(address)!r},"
            return f"{where} {reason} not listed in network.allow; {_CHANGED}"
        if self._any(port) if literal else self.names_permit(host, port):
            return None
        return f"not in network.allow {list(self.allow)!r}"

    def _any(self, port: int) -> bool:
        return any(r.kind == "any" and r.port_matches(port) for r in self._rules)


def network_policy(network: bool | NetworkPolicy) -> NetworkPolicy | None:
    """``SandboxParams.network`` as a policy: True is any public host, False none (None)."""
    if isinstance(network, NetworkPolicy):
        return network
    return NetworkPolicy() if network else None
