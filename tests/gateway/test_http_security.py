"""Host, Origin and credentials are parsed once and exactly (sagents.gateway._http_security)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import pytest
from starlette.types import Receive, Scope, Send

from sagents.gateway import Profile
from sagents.gateway._http_security import (
    CREDENTIAL_SCOPE_KEY,
    Credential,
    CredentialError,
    GatewaySecurityMiddleware,
    parse_authorization,
    parse_host,
    parse_host_rule,
)
from sagents.gateway._settings import GatewaySettings
from tests.gateway.fakes import FakeProvider
from tests.gateway.test_http import client, http_gateway

pytestmark = pytest.mark.anyio

_PORT = 18767


async def _answer(middleware: GatewaySecurityMiddleware, headers: list[tuple[bytes, bytes]]) -> int:
    """Send one request through ``middleware``; the status it answers (200: passed through)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    await middleware(scope, receive, send)  # type: ignore[arg-type]  # plain dicts as ASGI messages
    return int(sent[0]["status"])


def _middleware(tokens: tuple[str, ...] = ()) -> tuple[GatewaySecurityMiddleware, list[Any]]:
    seen: list[Any] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope.get(CREDENTIAL_SCOPE_KEY))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    middleware = GatewaySecurityMiddleware(
        app, hosts=["127.0.0.1", "localhost", "[::1]"], port=_PORT, tokens=tokens
    )
    return middleware, seen


def _initialize(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "t", "version": "1"},
        },
    }


def _host(value: str) -> tuple[bytes, bytes]:
    return (b"host", value.encode())


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:18767@evil.com",
        "127.0.0.1:18767.evil.com",
        "127.0.0.1:18767/evil",
        "127.0.0.1:18767:1",
        "127.0.0.1.evil.com:18767",
        "evil.com:18767",
        "127.0.0.1:1",
        "127.0.0.1",
        "user@127.0.0.1:18767",
        "127.0.0.1:018767x",
        "",
    ],
)
async def test_a_host_that_is_not_exactly_a_served_host_and_port_gets_421(host: str) -> None:
    middleware, seen = _middleware()
    assert await _answer(middleware, [_host(host)]) == 421
    assert seen == []


@pytest.mark.parametrize("host", ["127.0.0.1:18767", "LOCALHOST:18767", "[::1]:18767"])
async def test_a_served_host_and_port_pass(host: str) -> None:
    middleware, _ = _middleware()
    assert await _answer(middleware, [_host(host)]) == 200


async def test_two_host_headers_get_421() -> None:
    middleware, _ = _middleware()
    assert await _answer(middleware, [_host("127.0.0.1:18767"), _host("evil.com:80")]) == 421


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://127.0.0.1:6274", 200),
        ("https://localhost", 200),
        ("http://127.0.0.1:6274@evil.com", 403),
        ("http://127.0.0.1.evil.com", 403),
        ("http://evil.com", 403),
        ("null", 403),
        ("ftp://127.0.0.1:6274", 403),
        ("http://127.0.0.1:6274/path", 403),
    ],
)
async def test_an_origin_is_parsed_exactly(origin: str, status: int) -> None:
    middleware, _ = _middleware()
    headers = [_host("127.0.0.1:18767"), (b"origin", origin.encode())]
    assert await _answer(middleware, headers) == status


@pytest.mark.parametrize(
    "values",
    [
        [b"Bearer junk", b"Bearer viewer-token"],
        [b"Bearer viewer-token", b"Bearer viewer-token"],
        [b"Bearer"],
        [b"Bearer "],
        [b"Bearer viewer-token, Bearer other"],
        [b"Bearer viewer-token,junk"],
        [b"Bearer viewer token"],
        [b"Basic dXNlcjpwYXNz"],
        [b"viewer-token"],
        [b""],
    ],
    ids=repr,
)
async def test_a_repeated_or_malformed_authorization_gets_401(values: list[bytes]) -> None:
    for tokens in (("viewer-token",), ()):
        middleware, seen = _middleware(tokens)
        headers = [_host("127.0.0.1:18767"), *((b"authorization", v) for v in values)]
        assert await _answer(middleware, headers) == 401
        assert seen == []


@pytest.mark.parametrize(
    "value",
    [
        b"Bearer viewer-token",
        b"bearer viewer-token",
        b"BEARER   viewer-token",
        b" Bearer viewer-token ",
    ],
)
async def test_one_well_formed_bearer_header_passes_with_its_token(value: bytes) -> None:
    middleware, seen = _middleware(("viewer-token",))
    assert await _answer(middleware, [_host("127.0.0.1:18767"), (b"Authorization", value)]) == 200
    assert seen == [Credential("viewer-token")]


async def test_without_configured_tokens_a_presented_token_gives_no_identity() -> None:
    middleware, seen = _middleware()
    headers = [_host("127.0.0.1:18767"), (b"authorization", b"Bearer made-up")]
    assert await _answer(middleware, headers) == 200
    assert seen == [Credential(None)]


def test_parse_authorization_names_the_problem() -> None:
    with pytest.raises(CredentialError, match="more than one"):
        parse_authorization([(b"authorization", b"Bearer a"), (b"AUTHORIZATION", b"Bearer b")])
    assert parse_authorization([(b"content-type", b"x")]) is None


def test_host_parsing_and_allowed_host_rules() -> None:
    assert parse_host("[::1]:8765") == ("[::1]", 8765)
    with pytest.raises(ValueError, match="malformed"):
        parse_host("a:1@b")
    assert parse_host_rule("gw.example:*").accepts("gw.example", 1)
    assert not parse_host_rule("gw.example:443").accepts("gw.example", 80)
    with pytest.raises(ValueError, match="needs a port"):
        parse_host_rule("gw.example")


async def test_a_junk_header_before_a_viewer_token_does_not_get_the_default_profile() -> None:
    viewer = Profile(name="viewer", tools=frozenset({"fleet__status"}), mode="read_only")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"viewer-token": viewer}
    )
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    with anyio.fail_after(20):
        async with http_gateway(
            FakeProvider(), settings, token_profiles={"viewer-token": viewer}
        ) as url:
            async with httpx2.AsyncClient() as http:
                doubled = await http.post(
                    url,
                    headers=[
                        ("Content-Type", "application/json"),
                        ("Accept", "application/json, text/event-stream"),
                        ("Authorization", "Bearer junk"),
                        ("Authorization", "Bearer viewer-token"),
                    ],
                    content=body,
                )
                rebound = await http.post(
                    url,
                    headers={
                        "Host": f"127.0.0.1:{httpx2.URL(url).port}@evil.com",
                        "Content-Type": "application/json",
                        "Authorization": "Bearer viewer-token",
                    },
                    content=body,
                )
            async with client(url, token="viewer-token", mode="legacy") as mcp:
                names = {tool.name for tool in (await mcp.list_tools()).tools}
    assert doubled.status_code == 401
    assert rebound.status_code == 421
    assert names == {"fleet__status"}


async def test_a_session_id_does_not_carry_its_session_to_another_token() -> None:
    viewer = Profile(name="viewer", tools=frozenset({"fleet__status"}), mode="read_only")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"viewer-token": viewer}
    )
    initialize = _initialize({})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with anyio.fail_after(20):
        async with (
            http_gateway(FakeProvider(), settings, token_profiles={"viewer-token": viewer}) as url,
            httpx2.AsyncClient() as http,
        ):
            opened = await http.post(
                url, json=initialize, headers={**headers, "Authorization": "Bearer main-token"}
            )
            session = {
                **headers,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "Mcp-Protocol-Version": "2025-11-25",
            }
            await http.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers={**session, "Authorization": "Bearer main-token"},
            )
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            own = await http.post(
                url, json=listing, headers={**session, "Authorization": "Bearer main-token"}
            )
            hijacked = await http.post(
                url, json=listing, headers={**session, "Authorization": "Bearer viewer-token"}
            )
    assert "fleet__configure" in own.text
    assert hijacked.status_code == 404  # as if the session did not exist
    assert "fleet__configure" not in hijacked.text


async def test_an_allowed_host_is_matched_with_default_ports_for_host_and_origin() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    middleware = GatewaySecurityMiddleware(
        app,
        hosts=["0.0.0.0"],
        port=8765,
        allowed=[parse_host_rule("gw.example:443"), parse_host_rule("gw.internal:*")],
        origin_any_port=False,
    )
    proxied = [_host("gw.example:443"), (b"origin", b"https://gw.example")]
    assert await _answer(middleware, proxied) == 200
    assert (
        await _answer(middleware, [_host("gw.internal"), (b"origin", b"http://gw.internal")]) == 200
    )
    assert await _answer(middleware, [_host("gw.example")]) == 421  # port 80, not 443
    assert (
        await _answer(middleware, [_host("gw.example:443"), (b"origin", b"http://gw.example")])
        == 403
    )
    assert (
        await _answer(middleware, [_host("0.0.0.0:8765"), (b"origin", b"http://0.0.0.0:1")]) == 403
    )


async def test_another_token_cannot_delete_stream_or_answer_on_a_session_it_did_not_open() -> None:
    # Answers to the gateway's own requests (an approval's elicitation), GET streams and DELETE
    # never reach a tools/list handler: the session must be bound below the handlers.
    viewer = Profile(name="viewer", tools=frozenset({"fleet__status"}), mode="read_only")
    settings = GatewaySettings(
        transport="http", port=0, bearer_token="main-token", token_profiles={"viewer-token": viewer}
    )
    initialize = _initialize({"elicitation": {}})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    main = {"Authorization": "Bearer main-token"}
    other = {"Authorization": "Bearer viewer-token"}
    with anyio.fail_after(20):
        async with (
            http_gateway(FakeProvider(), settings, token_profiles={"viewer-token": viewer}) as url,
            httpx2.AsyncClient() as http,
        ):
            opened = await http.post(url, json=initialize, headers={**headers, **main})
            session = {
                **headers,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "Mcp-Protocol-Version": "2025-11-25",
            }
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(url, json=initialized, headers={**session, **main})
            answer = {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {"action": "accept", "content": {"decision": "allow_once"}},
            }
            answered = await http.post(url, json=answer, headers={**session, **other})
            async with http.stream(
                "GET", url, headers={**session, **other, "Accept": "text/event-stream"}
            ) as stream:
                streamed = stream.status_code  # the standalone stream of the session's messages
            deleted = await http.delete(url, headers={**session, **other})
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            own = await http.post(url, json=listing, headers={**session, **main})
    assert (answered.status_code, streamed, deleted.status_code) == (404, 404, 404)
    assert own.status_code == 200
    assert "fleet__configure" in own.text
