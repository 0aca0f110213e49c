"""The egress proxy on its own (docs/sandbox.md, "The network"): its allowlist, its address
rules and its HTTP handling, driven over its Unix socket as the in-sandbox forwarder drives it.

Loopback only: a public address is only ever refused before any connection is made (the
resolver is the test's own where a name must resolve to one).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

import anyio
import pytest

from sagents.sandbox import NetworkPolicy
from sagents.sandbox import _egress as egress
from sagents.sandbox._egress import MAX_HEAD_BYTES, egress_proxy
from tests.sandbox.http_peer import http_peer

pytestmark = pytest.mark.anyio

PUBLIC = ipaddress.ip_address("93.184.215.14")


def test_names_need_public_addresses_and_networks_let_their_addresses_through() -> None:
    policy = NetworkPolicy(allow=("api.github.com", "*.example.org", "10.1.0.0/16", "[::1]:80"))
    assert policy.refusal("api.github.com", 443, PUBLIC, literal=False) is None
    assert policy.refusal("a.b.example.org", 443, PUBLIC, literal=False) is None
    assert policy.refusal("example.org", 443, PUBLIC, literal=False) is not None  # not itself
    assert policy.refusal("evil.com", 443, PUBLIC, literal=False) is not None
    assert policy.refusal(str(PUBLIC), 443, PUBLIC, literal=True) is not None  # only "*"
    private = ipaddress.ip_address("10.1.2.3")
    assert policy.refusal("intranet.corp", 22, private, literal=False) is None
    why = policy.refusal("api.github.com", 443, ipaddress.ip_address("10.2.0.1"), literal=False)
    assert why is not None
    assert "a private address" in why
    loopback = ipaddress.ip_address("::1")
    assert policy.refusal("::1", 80, loopback, literal=True) is None
    assert policy.refusal("::1", 81, loopback, literal=True) is not None


def test_true_is_any_public_host_and_never_a_private_or_metadata_one() -> None:
    policy = NetworkPolicy()
    assert policy.allow == ("*",)
    assert policy.refusal(str(PUBLIC), 8443, PUBLIC, literal=True) is None
    for text in ("127.0.0.1", "10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "fe80::1"):
        address = ipaddress.ip_address(text)
        assert policy.refusal(text, 80, address, literal=True) is not None, text


def test_an_empty_or_malformed_allowlist_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        NetworkPolicy(allow=())
    with pytest.raises(ValueError, match="a list of entries"):
        NetworkPolicy(allow="api.github.com")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'ftp://x\.org' is a URL"):
        NetworkPolicy(allow=("ftp://x.org",))


async def _ask(path: str, request: bytes) -> bytes:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(request)
        answer = b""
        with anyio.fail_after(60):
            try:
                while True:
                    answer += await stream.receive()
            except anyio.EndOfStream:
                pass
    return answer


async def test_a_name_is_refused_when_any_of_its_addresses_is_not_public() -> None:
    async def rebinding(host: str, port: int) -> Sequence[str]:
        return [str(PUBLIC), "127.0.0.1"]  # a second answer pointing home

    policy = NetworkPolicy(allow=("api.example.org",))
    async with egress_proxy(policy, label="a test", resolver=rebinding) as path:
        answer = await _ask(path, b"CONNECT api.example.org:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403 sagents egress proxy refused api.example.org:443")
    assert b"resolves to '127.0.0.1', a loopback address" in answer


async def test_an_unlisted_name_is_refused_without_being_resolved() -> None:
    asked: list[str] = []

    async def resolver(host: str, port: int) -> Sequence[str]:
        asked.append(host)
        return [str(PUBLIC)]

    async with egress_proxy(NetworkPolicy(allow=("a.org",)), label="t", resolver=resolver) as path:
        answer = await _ask(path, b"GET http://b.org/ HTTP/1.1\r\nHost: b.org\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403")
    assert b"not in network.allow ['a.org']" in answer
    assert asked == []


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"NOT A REQUEST\r\n\r\n", b"400"),
        (b"GET https://a.org/ HTTP/1.1\r\n\r\n", b"400"),  # https goes through CONNECT
        (b"CONNECT a.org HTTP/1.1\r\n\r\n", b"400"),  # no port
        (b"GET http://a_b%00.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://a.org/ HTTP/1.1\r\nbad header\r\n\r\n", b"400"),
        (b"GET http://a.org/ HTTP/1.1\r\nX: " + b"y" * MAX_HEAD_BYTES + b"\r\n\r\n", b"431"),
    ],
)
async def test_a_malformed_request_gets_a_clear_error_and_the_proxy_keeps_serving(
    request_head: bytes, status: bytes
) -> None:
    async with http_peer() as port:
        allow = NetworkPolicy(allow=(f"127.0.0.1:{port}",))
        async with egress_proxy(allow, label="t") as path:
            answer = await _ask(path, request_head)
            async with await anyio.connect_unix(path) as dropped:
                await dropped.send(b"GET http://127.0.0.1")  # leaves in the middle of a head
            after = await _ask(path, f"GET http://127.0.0.1:{port}/ok HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 " + status + b" sagents egress proxy"), answer
    assert after.endswith(b"peer /ok")


async def test_a_plain_request_is_sent_on_in_origin_form_without_proxy_headers() -> None:
    async with http_peer() as port:
        allow = NetworkPolicy(allow=(f"127.0.0.1:{port}",))
        async with egress_proxy(allow, label="t") as path:
            answer = await _ask(
                path,
                f"GET http://127.0.0.1:{port}/headers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
                "X-Kept: yes\r\n\r\n".encode(),
            )
    assert answer.startswith(b"HTTP/1.0 200"), answer
    body = answer.split(b"\r\n\r\n", 1)[1].lower()
    assert b"x-kept: yes" in body
    assert b"connection: close" in body
    assert b"proxy-" not in body


async def test_a_port_of_this_process_is_refused_after_connecting_before_any_byte() -> None:
    with socket.socket() as gateway:
        gateway.bind(("127.0.0.1", 0))
        gateway.listen()
        port = gateway.getsockname()[1]
        allow = NetworkPolicy(allow=("127.0.0.0/8",))
        async with egress_proxy(allow, label="t") as path:
            answer = await _ask(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        connection, _ = gateway.accept()
        with connection:
            assert connection.recv(1024) == b""
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert b"a port of the gateway (this host process) itself" in answer


@pytest.mark.parametrize(
    ("family", "bound", "allowed", "target"),
    [
        (socket.AF_INET, "127.0.0.1", "0.0.0.0/0", "0.0.0.0"),
        (socket.AF_INET, "127.0.0.1", "0.0.0.0", "0.0.0.0"),
        (socket.AF_INET6, "::1", "::/0", "[::]"),
    ],
)
async def test_the_unspecified_address_does_not_reach_a_port_of_this_process(
    family: socket.AddressFamily, bound: str, allowed: str, target: str
) -> None:
    """Connecting to 0.0.0.0 (or ::) reaches this host's loopback: what counts is the peer the
    connection reached, not the address written."""
    with socket.socket(family) as gateway:
        gateway.bind((bound, 0))
        gateway.listen()
        port = gateway.getsockname()[1]
        allow = NetworkPolicy(allow=(allowed,))
        async with egress_proxy(allow, label="t") as path:
            answer = await _ask(path, f"CONNECT {target}:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403"), answer
    assert b"a port of the gateway (this host process) itself" in answer


async def test_connections_over_the_cap_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(egress, "MAX_CONNECTIONS", 1)
    async with http_peer() as port:
        allow = NetworkPolicy(allow=(f"127.0.0.1:{port}",))
        async with (
            egress_proxy(allow, label="t") as path,
            await anyio.connect_unix(path) as tunnel,
        ):
            await tunnel.send(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
            with anyio.fail_after(60):
                established = await tunnel.receive()
            over = await _ask(path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert established.startswith(b"HTTP/1.1 200")
    assert over.startswith(b"HTTP/1.1 503 sagents egress proxy refused a connection: over 1")


async def test_a_request_head_that_never_ends_is_shut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(egress, "HEAD_TIMEOUT_SECONDS", 0.5)
    async with (
        egress_proxy(NetworkPolicy(), label="t") as path,
        await anyio.connect_unix(path) as slow,
    ):
        await slow.send(b"GET http://a.org/ HTTP/1.1\r\n")
        with anyio.fail_after(60), pytest.raises(anyio.EndOfStream):
            await slow.receive()  # shut by the proxy, answered nothing


async def test_a_resolver_failure_or_garbage_is_a_clear_error() -> None:
    async def garbage(host: str, port: int) -> Sequence[str]:
        return ["not an address"]

    async def failing(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror(-2, "Name or service not known")

    answers = []
    for resolver in (garbage, failing):
        async with egress_proxy(NetworkPolicy(), label="t", resolver=resolver) as path:
            answers.append(await _ask(path, b"CONNECT a.org:443 HTTP/1.1\r\n\r\n"))
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 502 sagents egress proxy cannot resolve 'a.org'")
