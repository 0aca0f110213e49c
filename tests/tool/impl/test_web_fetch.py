"""web_fetch: loopback pages (loopback allowed in the test's settings) come back as markdown;
every refused address form, redirect hop and rebinding answer is refused by default; caps."""

from __future__ import annotations

import gzip
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
import trustme

from sagents.sandbox import create_sandbox
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import WebFetchSettings, register_builtin_tools, single_sandbox
from sagents.tool.impl._netguard import refusal_reason

pytestmark = pytest.mark.anyio

PAGE = (
    b"<html><head><title>Loopback page</title><style>p{}</style></head><body>"
    b"<h1>Heading</h1><p>Some <b>bold</b> text and <a href='/x'>a link</a>.</p>"
    b"<script>alert(1)</script></body></html>"
)


@dataclass
class Server:
    port: int
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = field(default_factory=dict)


SHUTDOWN_POLL_S = 0.02
"""How often a test server's loop checks for ``shutdown()`` (``serve_forever``'s poll)."""


def _serve(host: str, tls: ssl.SSLContext | None = None, port: int = 0) -> Iterator[Server]:
    state: Server

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            route = state.routes.get(self.path.split("?", 1)[0])
            if route is None:
                self.send_response(404)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"not here")
                return
            route(self)

    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    state = Server(port=httpd.server_address[1])
    # shutdown() returns at the loop's next poll: 0.5 s by default, twice per test of two servers
    thread = threading.Thread(target=httpd.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _serve("127.0.0.1")


def _send(handler: BaseHTTPRequestHandler, body: bytes, ctype: str, **headers: str) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    handler.wfile.write(body)


def _redirect(to: str, status: int = 302) -> Callable[[BaseHTTPRequestHandler], None]:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", to)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return route


LOOPBACK_OK = WebFetchSettings(allow_networks=("127.0.0.0/8",))


async def _fetch(
    settings: WebFetchSettings, context: SessionContext | None = None, **arguments: object
) -> tuple[dict[str, object], str, bool, str | None]:
    manager = ToolManager()
    register_builtin_tools(manager, None, names=["web_fetch"], web_fetch=settings)
    with anyio.fail_after(20):
        result = await manager.run_tool("web_fetch", dict(arguments), context)
    code = result.error.code if result.error else None
    return result.structured or {}, result.text, result.is_error, code


async def test_a_loopback_page_comes_back_as_markdown_with_its_title(server: Server) -> None:
    server.routes["/page"] = lambda h: _send(h, PAGE, "text/html; charset=utf-8")
    data, text, is_error, _ = await _fetch(LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/page")
    assert not is_error
    assert data["title"] == "Loopback page"
    assert data["status"] == 200
    assert data["content_type"] == "text/html"
    assert str(data["final_url"]).endswith("/page")
    content = str(data["content"])
    assert content.startswith("# Heading")
    assert "**bold**" in content
    assert "[a link](/x)" in content
    assert "alert" not in content
    assert "p{}" not in content
    assert text.startswith("Title: Loopback page\nURL: http://127.0.0.1:")


async def test_text_and_html_formats(server: Server) -> None:
    server.routes["/page"] = lambda h: _send(h, PAGE, "text/html")
    url = f"http://127.0.0.1:{server.port}/page"
    data, _, _, _ = await _fetch(LOOPBACK_OK, url=url, format="text")
    assert "Heading" in str(data["content"])
    assert "#" not in str(data["content"])
    data, _, _, _ = await _fetch(LOOPBACK_OK, url=url, format="html")
    assert str(data["content"]).startswith("<html>")
    assert data["title"] == "Loopback page"


async def test_loopback_is_refused_by_default_and_nothing_connects(server: Server) -> None:
    server.routes["/page"] = lambda h: _send(h, PAGE, "text/html")
    _, text, is_error, code = await _fetch(
        WebFetchSettings(), url=f"http://127.0.0.1:{server.port}/page"
    )
    assert is_error
    assert code == "url_not_allowed"
    assert "loopback" in text
    assert "allowNetworks" in text
    assert server.seen == []


# Every literal notation of 127.0.0.1 (and friends) the URL parser or the system resolver
# accepts; each must end at the address check, with no connection made.
LITERALS = [
    "127.0.0.1",
    "2130706433",  # decimal
    "0x7f000001",  # hex
    "0x7f.0.0.1",
    "0177.0.0.1",  # octal
    "017700000001",
    "127.1",  # short forms
    "127.0.1",
    "[::1]",
    "[::ffff:127.0.0.1]",  # IPv4-mapped
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[::127.0.0.1]",  # IPv4-compatible
    "0.0.0.0",
    "0",
    "[::]",
    "localhost",
]


@pytest.mark.parametrize("host", LITERALS)
async def test_every_loopback_notation_is_refused_by_default(server: Server, host: str) -> None:
    _, text, is_error, code = await _fetch(WebFetchSettings(), url=f"http://{host}:{server.port}/")
    assert is_error, text
    assert code == "url_not_allowed" or "the URL is not valid" in text, text  # httpx refuses octal
    assert server.seen == []


@pytest.mark.parametrize(
    ("address", "phrase"),
    [
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("::ffff:8.8.8.8", "IPv4-mapped"),
        ("64:ff9b::a00:1", "embeds an IPv4"),
        ("2002:7f00:1::", "embeds an IPv4"),
        ("192.0.2.1", "address"),
        ("255.255.255.255", ""),
        ("0.0.0.0", "unspecified"),
    ],
)
async def test_names_resolving_to_refused_addresses_are_refused(address: str, phrase: str) -> None:
    calls: list[str] = []

    async def resolver(host: str, port: int) -> Sequence[str]:
        calls.append(host)
        return [address]

    settings = WebFetchSettings(resolver=resolver)
    _, text, is_error, code = await _fetch(settings, url="http://internal.example.test/")
    assert is_error, text
    assert code == "url_not_allowed", text
    assert phrase in text
    assert calls == ["internal.example.test"]


def test_public_addresses_pass_the_check() -> None:
    import ipaddress

    for address in ("93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "1.1.1.1"):
        assert refusal_reason(ipaddress.ip_address(address)) is None


async def test_a_name_with_one_refused_address_among_public_ones_is_refused() -> None:
    async def resolver(host: str, port: int) -> Sequence[str]:
        return ["93.184.216.34", "127.0.0.1"]

    _, text, _, code = await _fetch(WebFetchSettings(resolver=resolver), url="http://mixed.test/")
    assert code == "url_not_allowed"
    assert "127.0.0.1" in text


async def test_dns_rebinding_never_reaches_the_second_answer(server: Server) -> None:
    # 127.0.0.2 stands for a public address (allowed here); the later answers are loopback
    # 127.0.0.1, where the victim listens on the same port. The name is resolved once and the
    # socket goes to the checked address, so the public server answers and the victim sees
    # nothing.
    answers = iter([["127.0.0.2"], ["127.0.0.1"], ["127.0.0.1"]])
    calls: list[str] = []

    async def resolver(host: str, port: int) -> Sequence[str]:
        calls.append(host)
        return next(answers)

    victim = server
    victim.routes["/"] = lambda h: _send(h, b"secret", "text/plain")
    settings = WebFetchSettings(allow_networks=("127.0.0.2/32",), resolver=resolver)
    for public in _serve("127.0.0.2", port=victim.port):
        public.routes["/"] = lambda h: _send(h, b"public", "text/plain")
        data, text, is_error, _ = await _fetch(
            settings, url=f"http://rebind.example.test:{victim.port}/"
        )
        assert not is_error, text
        assert data["content"] == "public"
        assert calls == ["rebind.example.test"]
        assert victim.seen == []
        assert public.seen[0][1]["host"] == f"rebind.example.test:{victim.port}"


async def test_pinned_connection_keeps_the_host_header() -> None:
    async def resolver(host: str, port: int) -> Sequence[str]:
        return ["127.0.0.2"]

    for public in _serve("127.0.0.2"):
        public.routes["/"] = lambda h: _send(h, b"hello", "text/plain")
        settings = WebFetchSettings(allow_networks=("127.0.0.2/32",), resolver=resolver)
        data, _, is_error, _ = await _fetch(
            settings, url=f"http://site.example.test:{public.port}/"
        )
        assert not is_error
        assert data["content"] == "hello"
        assert public.seen[0][1]["host"] == f"site.example.test:{public.port}"


async def test_a_second_connection_to_a_rebound_name_is_refused() -> None:
    answers = iter([["127.0.0.2"], ["127.0.0.1"]])

    async def resolver(host: str, port: int) -> Sequence[str]:
        return next(answers)

    for public in _serve("127.0.0.2"):
        other = f"http://rebind.example.test:{public.port + 0}/again"
        public.routes["/"] = _redirect(other)
        public.routes["/again"] = lambda h: _send(h, b"x", "text/plain")
        settings = WebFetchSettings(allow_networks=("127.0.0.2/32",), resolver=resolver)
        # the first response closes its connection (HTTP/1.0 server), so the redirect opens a
        # new one and resolves again: the loopback answer is refused
        _, text, _, code = await _fetch(settings, url=f"http://rebind.example.test:{public.port}/")
        assert code == "url_not_allowed"
        assert "loopback" in text


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{victim}/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]:{victim}/",
        "http://2130706433:{victim}/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:{victim}/",
    ],
)
async def test_every_redirect_hop_is_checked(server: Server, target: str) -> None:
    victim = server
    victim.routes["/"] = lambda h: _send(h, b"secret", "text/plain")
    for public in _serve("127.0.0.2"):
        public.routes["/"] = _redirect(target.format(victim=victim.port))
        settings = WebFetchSettings(allow_networks=("127.0.0.2/32",))
        _, text, is_error, code = await _fetch(settings, url=f"http://127.0.0.2:{public.port}/")
        assert is_error, text
        assert code == "url_not_allowed", text
        assert victim.seen == []
        assert len(public.seen) == 1


async def test_redirects_are_followed_up_to_the_cap(server: Server) -> None:
    base = f"http://127.0.0.1:{server.port}"
    for n in range(6):
        server.routes[f"/r{n}"] = _redirect(f"{base}/r{n + 1}", 301 if n % 2 else 307)
    server.routes["/r6"] = lambda h: _send(h, b"end", "text/plain")
    data, _, is_error, _ = await _fetch(
        WebFetchSettings(allow_networks=("127.0.0.0/8",), max_redirects=6), url=f"{base}/r0"
    )
    assert not is_error
    assert data["content"] == "end"
    redirects = data["redirects"]
    assert isinstance(redirects, list)
    assert len(redirects) == 6
    _, text, is_error, code = await _fetch(
        WebFetchSettings(allow_networks=("127.0.0.0/8",), max_redirects=5), url=f"{base}/r0"
    )
    assert code == "fetch_error"
    assert "more than 5 times" in text


async def test_credentials_never_cross_origins(server: Server) -> None:
    for other in _serve("127.0.0.1"):
        other.routes["/"] = lambda h: _send(h, b"other", "text/plain")
        server.routes["/start"] = _redirect(f"http://127.0.0.1:{server.port}/same")
        server.routes["/same"] = _redirect(f"http://127.0.0.1:{other.port}/")
        url = f"http://user:pw@127.0.0.1:{server.port}/start"
        data, _, is_error, _ = await _fetch(LOOPBACK_OK, url=url)
        assert not is_error
        assert data["content"] == "other"
        assert server.seen[0][1]["authorization"].startswith("Basic ")
        assert server.seen[1][1]["authorization"] == server.seen[0][1]["authorization"]
        assert "authorization" not in other.seen[0][1]


async def test_domain_lists_of_the_settings_and_of_the_session(server: Server) -> None:
    async def resolver(host: str, port: int) -> Sequence[str]:
        return ["127.0.0.1"]

    server.routes["/"] = lambda h: _send(h, b"ok", "text/plain")
    settings = WebFetchSettings(
        allow_networks=("127.0.0.0/8",),
        deny_domains=("bad.test",),
        allow_domains=("good.test", "bad.test"),
        resolver=resolver,
    )
    port = server.port
    data, _, is_error, _ = await _fetch(settings, url=f"http://docs.good.test:{port}/")
    assert not is_error
    assert data["content"] == "ok"
    for url in (f"http://api.bad.test:{port}/", f"http://elsewhere.test:{port}/"):
        _, text, _, code = await _fetch(settings, url=url)
        assert code == "url_not_allowed", text
    narrowed = SessionContext(trusted={"web_fetch_deny_domains": ["docs.good.test"]})
    _, _, _, code = await _fetch(settings, narrowed, url=f"http://docs.good.test:{port}/")
    assert code == "url_not_allowed"
    only = SessionContext(trusted={"web_fetch_allow_domains": ["www.good.test"]})
    _, _, _, code = await _fetch(settings, only, url=f"http://docs.good.test:{port}/")
    assert code == "url_not_allowed"
    assert len(server.seen) == 1


async def test_size_cap_cuts_the_body_and_says_so(server: Server) -> None:
    server.routes["/big"] = lambda h: _send(h, b"a" * 300_000, "text/plain")
    settings = WebFetchSettings(allow_networks=("127.0.0.0/8",), max_bytes=100_000)
    data, text, _, _ = await _fetch(settings, url=f"http://127.0.0.1:{server.port}/big")
    assert data["bytes"] == 100_000
    assert data["body_truncated"] is True
    assert "cut at 100,000 bytes" in text


async def test_max_chars_truncates_and_names_the_total(server: Server) -> None:
    server.routes["/t"] = lambda h: _send(h, b"b" * 5000, "text/plain")
    data, text, _, _ = await _fetch(
        LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/t", max_chars=1000
    )
    assert data["content"] == "b" * 1000
    assert data["truncated"] is True
    assert data["total_chars"] == 5000
    assert "4,000 more characters" in text


async def test_a_decompression_bomb_stops_at_the_cap(server: Server) -> None:
    bomb = gzip.compress(b"\0" * 50_000_000, compresslevel=9)
    assert len(bomb) < 100_000
    server.routes["/bomb"] = lambda h: _send(h, bomb, "text/plain", Content_Encoding="gzip")
    settings = WebFetchSettings(allow_networks=("127.0.0.0/8",), max_bytes=1_000_000)
    data, _, _, _ = await _fetch(settings, url=f"http://127.0.0.1:{server.port}/bomb")
    assert data["bytes"] == 1_000_000
    assert data["body_truncated"] is True


async def test_gzip_bodies_are_decoded(server: Server) -> None:
    body = gzip.compress(PAGE)
    server.routes["/gz"] = lambda h: _send(h, body, "text/html", Content_Encoding="gzip")
    data, _, _, _ = await _fetch(LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/gz")
    assert data["title"] == "Loopback page"


async def test_an_unknown_content_encoding_is_a_clear_error(server: Server) -> None:
    server.routes["/br"] = lambda h: _send(h, b"xx", "text/plain", Content_Encoding="br")
    _, text, _, code = await _fetch(LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/br")
    assert code == "fetch_error"
    assert "'br'" in text


async def test_a_slow_server_hits_the_time_cap(server: Server) -> None:
    def slow(handler: BaseHTTPRequestHandler) -> None:
        server.release.wait(30)

    server.routes["/slow"] = slow
    settings = WebFetchSettings(allow_networks=("127.0.0.0/8",), timeout_seconds=0.5)
    _, text, _, code = await _fetch(settings, url=f"http://127.0.0.1:{server.port}/slow")
    assert code == "fetch_error"
    assert "0.5 s" in text or "timed out" in text


async def test_http_errors_are_error_results_with_the_body(server: Server) -> None:
    data, text, is_error, _ = await _fetch(LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/no")
    assert is_error
    assert data["status"] == 404
    assert "not here" in text


async def test_binary_content_is_described_not_dumped(server: Server) -> None:
    server.routes["/img"] = lambda h: _send(h, b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "image/png")
    data, _, _, _ = await _fetch(LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/img")
    assert "binary content of type 'image/png', 108 bytes" in str(data["content"])


async def test_save_to_writes_the_body_into_the_workspace(server: Server, tmp_path: Path) -> None:
    server.routes["/page"] = lambda h: _send(h, PAGE, "text/html")
    async with create_sandbox("memory", workspace=str(tmp_path)) as sandbox:
        manager = ToolManager()
        register_builtin_tools(
            manager, single_sandbox(sandbox), names=["web_fetch"], web_fetch=LOOPBACK_OK
        )
        url = f"http://127.0.0.1:{server.port}/page"
        with anyio.fail_after(20):
            result = await manager.run_tool("web_fetch", {"url": url, "save_to": "dl/p.html"})
            assert not result.is_error, result.text
            assert await sandbox.read_file("dl/p.html") == PAGE
            refused = await manager.run_tool(
                "web_fetch",
                {"url": url, "save_to": "x.html"},
                SessionContext(permission_mode="read_only"),
            )
        assert refused.error is not None
        assert refused.error.code == "not_allowed"


async def test_only_http_and_https() -> None:
    for url in ("ftp://example.com/", "file:///etc/passwd", "javascript:alert(1)"):
        _, text, _, code = await _fetch(WebFetchSettings(), url=url)
        assert code in ("url_not_allowed", "fetch_error"), text


def test_web_fetch_is_read_only_and_open_world() -> None:
    from sagents.tool.impl import BuiltinTools

    spec = BuiltinTools(None).spec("web_fetch")
    assert spec.permission == "read_only"
    assert spec.annotations.open_world_hint is True


def _serve_tls(cert_name: str) -> Iterator[tuple[Server, ssl.SSLContext, list[str | None]]]:
    """An HTTPS server on 127.0.0.2 with a certificate for ``cert_name``; yields the state, a
    client context trusting its CA, and the server names (SNI) clients sent."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(cert_name).configure_cert(server_context)
    names: list[str | None] = []

    def remember(sock: object, name: str | None, context: object) -> None:
        names.append(name)

    server_context.sni_callback = remember
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    for state in _serve("127.0.0.2", server_context):
        yield state, client_context, names


async def _resolve_to_127_0_0_2(host: str, port: int) -> Sequence[str]:
    return ["127.0.0.2"]


async def test_tls_goes_to_the_pinned_address_with_the_name_as_sni_and_certificate() -> None:
    for state, trust, names in _serve_tls("secure.example.test"):
        state.routes["/"] = lambda h: _send(h, b"over tls", "text/plain")
        settings = WebFetchSettings(
            allow_networks=("127.0.0.2/32",), resolver=_resolve_to_127_0_0_2, ssl_context=trust
        )
        url = f"https://secure.example.test:{state.port}/"
        data, text, is_error, _ = await _fetch(settings, url=url)
        assert not is_error, text
        assert data["content"] == "over tls"
        assert names == ["secure.example.test"]
        assert state.seen[0][1]["host"] == f"secure.example.test:{state.port}"


async def test_tls_certificate_is_checked_against_the_name_not_the_address() -> None:
    for state, trust, _names in _serve_tls("other.example.test"):
        state.routes["/"] = lambda h: _send(h, b"wrong", "text/plain")
        settings = WebFetchSettings(
            allow_networks=("127.0.0.2/32",), resolver=_resolve_to_127_0_0_2, ssl_context=trust
        )
        _, text, is_error, code = await _fetch(
            settings, url=f"https://secure.example.test:{state.port}/"
        )
        assert is_error
        assert code == "fetch_error"
        assert "certificate" in text.lower() or "hostname" in text.lower(), text
        assert state.seen == []


@pytest.mark.parametrize("raw", [False, True])
async def test_deflate_bodies_are_decoded_wrapped_or_raw(server: Server, raw: bool) -> None:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    body = packer.compress(PAGE) + packer.flush()
    server.routes["/d"] = lambda h: _send(h, body, "text/html", Content_Encoding="deflate")
    data, text, _, _ = await _fetch(LOOPBACK_OK, url=f"http://127.0.0.1:{server.port}/d")
    assert data["title"] == "Loopback page", text
