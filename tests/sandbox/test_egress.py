"""The network of a ``local`` sandbox made with network (docs/sandbox.md, "The network"): a
namespace of its own whose only way out is the host's egress proxy, with an allowlist.

Loopback only: the peer is a real HTTP server in another process on 127.0.0.1; a public
address is only ever refused before any connection is made.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sagents.sandbox import NetworkPolicy, SandboxParams, create_sandbox
from sagents.sandbox._bwrap import python_runtime
from tests.sandbox.http_peer import http_peer

pytestmark = pytest.mark.anyio

PYTHON = python_runtime()[1]

_FETCH = """\
import sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=30) as response:
        print("HTTP", response.status, response.read().decode())
except urllib.error.HTTPError as error:
    print("HTTP", error.code, error.reason)
except OSError as error:
    print("ERROR", error)
"""

_CONNECT = """\
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("CONNECTED")
except OSError as error:
    print("ERROR", error)
"""


@pytest.fixture
async def peer() -> AsyncIterator[int]:
    async with http_peer() as port:
        yield port


async def _run(tmp_path: Path, network: bool | NetworkPolicy, code: str, *args: str) -> str:
    params = SandboxParams(workspace=str(tmp_path / "ws"), network=network)
    async with create_sandbox("local", params) as sandbox:
        done = await sandbox.run([PYTHON, "-c", code, *args], timeout=60)
    return (done.stdout + done.stderr).decode(errors="replace").strip()


async def test_a_listed_loopback_port_is_reached_through_the_proxy(
    tmp_path: Path, peer: int
) -> None:
    allow = NetworkPolicy(allow=(f"127.0.0.1:{peer}",))
    answer = await _run(tmp_path, allow, _FETCH, f"http://127.0.0.1:{peer}/hello")
    assert answer == "HTTP 200 peer /hello"


async def test_a_connect_tunnel_reaches_a_listed_port(tmp_path: Path, peer: int) -> None:
    tunnel = (
        "import http.client, os, urllib.parse\n"
        "proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])\n"
        "conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)\n"
        f"conn.set_tunnel('127.0.0.1', {peer})\n"
        "conn.request('GET', '/tunnelled')\n"
        "print(conn.getresponse().read().decode())\n"
    )
    answer = await _run(tmp_path, NetworkPolicy(allow=(f"127.0.0.1:{peer}",)), tunnel)
    assert answer == "peer /tunnelled"


@pytest.mark.parametrize("network", [True, NetworkPolicy(allow=("127.0.0.1",))])
async def test_the_hosts_loopback_is_not_reachable_directly(
    tmp_path: Path, peer: int, network: bool | NetworkPolicy
) -> None:
    answer = await _run(tmp_path, network, _CONNECT, str(peer))
    assert answer.startswith("ERROR"), answer  # a namespace with only its own loopback


async def test_an_unlisted_port_is_refused_with_the_reason(tmp_path: Path, peer: int) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        other.setblocking(False)
        port = other.getsockname()[1]
        allow = NetworkPolicy(allow=(f"127.0.0.1:{peer}",))
        answer = await _run(tmp_path, allow, _FETCH, f"http://127.0.0.1:{port}/")
        with pytest.raises(BlockingIOError):
            other.accept()
    assert answer.startswith("HTTP 403 sagents egress proxy refused"), answer
    assert f"127.0.0.1:{port}" in answer
    assert "not listed in network.allow" in answer


async def test_a_listed_name_that_resolves_to_a_private_address_is_refused(
    tmp_path: Path, peer: int
) -> None:
    answer = await _run(
        tmp_path, NetworkPolicy(allow=("localhost",)), _FETCH, f"http://localhost:{peer}/"
    )
    assert answer.startswith("HTTP 403"), answer
    assert "'localhost' resolves to '127.0.0.1', a loopback address" in answer
    assert "'network: true' no longer reaches loopback" in answer  # the breaking change, said


@pytest.mark.parametrize("network", [True, NetworkPolicy(allow=("*.example.org",))])
async def test_the_metadata_address_is_refused(
    tmp_path: Path, network: bool | NetworkPolicy
) -> None:
    url = "http://169.254.169.254/latest/meta-data/"
    answer = await _run(tmp_path, network, _FETCH, url)
    assert answer.startswith("HTTP 403"), answer
    assert "169.254.169.254" in answer


@pytest.mark.parametrize("listed", [True, False])
async def test_a_port_of_the_host_process_is_refused_listed_or_not(
    tmp_path: Path, listed: bool
) -> None:
    with socket.socket() as gateway:  # as the gateway's own listening port would be
        gateway.bind(("127.0.0.1", 0))
        gateway.listen()
        port = gateway.getsockname()[1]
        allow = NetworkPolicy(allow=(f"127.0.0.1:{port}",) if listed else ("*",))
        answer = await _run(tmp_path, allow, _FETCH, f"http://127.0.0.1:{port}/console/")
        if listed:  # connected, then closed before any byte was sent
            connection, _ = gateway.accept()
            with connection:
                assert connection.recv(1024) == b""
    assert answer.startswith("HTTP 403"), answer
    if listed:
        assert "a port of the gateway (this host process) itself" in answer


_RAW = """\
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30) as connection:
        connection.sendall(b"GET /raw HTTP/1.0\\r\\n\\r\\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    print("RAW", answer.decode().rsplit("\\r\\n\\r\\n", 1)[-1] or "(closed)")
except OSError as error:
    print("ERROR", error)
"""


async def test_a_listed_loopback_port_takes_raw_tcp_at_its_own_address(
    tmp_path: Path, peer: int
) -> None:
    """A client that knows no proxy (PostgreSQL's, here raw bytes) dials the listed
    ``127.0.0.1:PORT`` itself: the forwarder listens there inside and tunnels each connection
    through the proxy with ``CONNECT``, under the same checks."""
    allow = NetworkPolicy(allow=(f"127.0.0.1:{peer}",))
    answer = await _run(tmp_path, allow, _RAW, str(peer))
    assert answer == "RAW peer /raw"


async def test_raw_tcp_to_a_listed_port_of_the_host_process_is_refused_and_said(
    tmp_path: Path,
) -> None:
    with socket.socket() as gateway:
        gateway.bind(("127.0.0.1", 0))
        gateway.listen()
        gateway.settimeout(60)  # a failure, not a hang, if the proxy never connects
        port = gateway.getsockname()[1]
        answer = await _run(tmp_path, NetworkPolicy(allow=(f"127.0.0.1:{port}",)), _RAW, str(port))
        connection, _ = gateway.accept()  # the proxy connected, then closed before any byte
        with connection:
            assert connection.recv(1024) == b""
    # closed before any byte (a reset when the request was still unread)
    assert answer.startswith(("RAW (closed)", "ERROR [Errno 104]")), answer
    assert "sagents egress bridge: 127.0.0.1:" in answer
    assert "a port of the gateway (this host process) itself" in answer
