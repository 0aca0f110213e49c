"""The issuer's keys: cached, fetched again when it rotates them, refused when it is gone
(sagents.gateway._oauth.AccessTokenVerifier against oidc-provider, tests/gateway/oauth_peer.py).
"""

from __future__ import annotations

import anyio
import anyio.abc
import jwt
import pytest

from sagents.config._oauth import OAuthConfig
from sagents.gateway import _oauth
from sagents.gateway._oauth import (
    JWKS_MAX_AGE_S,
    JWKS_MIN_REFRESH_S,
    AccessTokenVerifier,
    AuthorizationServerUnavailable,
    TokenRejected,
)
from tests.gateway.oauth_peer import authorization_server, issue_token, signing_key
from tests.mcp.helpers import free_port

pytestmark = pytest.mark.anyio

RESOURCE = "http://127.0.0.1:9/mcp"


async def test_a_rotated_key_is_fetched_again_and_a_gone_issuer_fails_closed() -> None:
    old, _ = signing_key("old")
    new, _ = signing_key("new")
    now = [1000.0]
    port = free_port()
    with authorization_server(old, port=port) as issuer:
        verifier = AccessTokenVerifier(
            OAuthConfig(issuer=issuer), audience=RESOURCE, monotonic=lambda: now[0]
        )
        before = await issue_token(issuer, RESOURCE, "alice")
        first = await verifier.verify(before)
    # the issuer restarts with a new signing key, still publishing the old one
    with authorization_server(new, old, port=port) as restarted:
        assert restarted == issuer
        rotated = await issue_token(issuer, RESOURCE, "alice")
        assert jwt.get_unverified_header(rotated)["kid"] == "new"
        with pytest.raises(TokenRejected, match="no key of the issuer matches"):
            await verifier.verify(rotated)  # the keys were fetched moments ago: not again yet
        now[0] += JWKS_MIN_REFRESH_S
        second = await verifier.verify(rotated)
        still = await verifier.verify(before)  # the old key is still published
    assert first.subject == second.subject == still.subject == "alice"
    assert second.scopes == frozenset({"mcp"})
    cached = await verifier.verify(rotated)  # the issuer is gone: its cached keys still serve
    assert cached.subject == "alice"
    now[0] += JWKS_MAX_AGE_S + 1
    with pytest.raises(AuthorizationServerUnavailable, match="cannot be used"):
        await verifier.verify(rotated)  # too old to trust, and no fresh ones: refused


async def test_an_issuer_that_answers_a_byte_at_a_time_is_given_up_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each byte comes before the read timeout, so only a bound on the whole request ends it:
    # without one, every token check waits on the issuer for as long as it trickles.
    monkeypatch.setattr(_oauth, "FETCH_TIMEOUT_S", 1.0)
    stop = anyio.Event()

    async def trickle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.receive()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            await stream.send(head + b"Content-Length: 100000\r\n\r\n{")
            with anyio.move_on_after(60):
                while not stop.is_set():
                    await stream.send(b" ")
                    await anyio.sleep(0.1)  # the slow peer's pace, not a wait for the test

    async with (
        await anyio.create_tcp_listener(local_host="127.0.0.1") as listener,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(listener.serve, trickle)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        verifier = AccessTokenVerifier(
            OAuthConfig(issuer=f"http://127.0.0.1:{port}"), audience=RESOURCE
        )
        token = jwt.encode(
            {"sub": "s"}, signing_key("k")[1], algorithm="ES256", headers={"kid": "k"}
        )
        try:
            with anyio.fail_after(30), pytest.raises(AuthorizationServerUnavailable):
                await verifier.verify(token)
        finally:
            stop.set()
            tasks.cancel_scope.cancel()
