"""A model endpoint that cannot be reached (nothing listens on its port, or it accepts the
connection and closes it at once) ends the call with ``model_unavailable`` once the retries are
used up, on every adapter: nothing of an answer came, so nothing broke off mid-answer
(``model_stream_broken`` is for an answer cut after part of it was passed on; docs/agent.md,
"The model seam"). Each adapter talks through its provider's official SDK client to a real
loopback socket."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from sagents.agent import (
    AnthropicModel,
    ChatModel,
    GeminiModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    SAgent,
)
from tests.agent.helpers import collect, done_of

pytestmark = pytest.mark.anyio

APIS = ("chat", "responses", "anthropic", "gemini")
USER = [{"role": "user", "content": "go"}]


def adapter(api: str, root: str, *, stream: bool) -> ChatModel:
    """The adapter of ``api`` pointed at ``root`` (``http://127.0.0.1:PORT``), one retry."""
    options: dict[str, Any] = {"model": "m", "api_key": "k", "stream": stream, "max_retries": 1}
    if api == "responses":
        return OpenAIResponsesModel(base_url=f"{root}/v1", **options)
    if api == "anthropic":
        return AnthropicModel(base_url=root, **options)
    if api == "gemini":
        return GeminiModel(base_url=root, **options)
    return OpenAIChatModel(base_url=f"{root}/v1", **options)


@asynccontextmanager
async def closing_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server that accepts each connection and closes it without a byte; yields
    its root URL and a list that grows by one per connection."""
    accepted: list[int] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def close_at_once(connection: anyio.abc.SocketStream) -> None:
        accepted.append(1)
        await connection.aclose()

    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, close_at_once)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        yield f"http://127.0.0.1:{port}", accepted
        tasks.cancel_scope.cancel()


def refused_root() -> str:
    """The root URL of a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def run_once(model: ChatModel) -> Mapping[str, Any]:
    try:
        events = await collect(SAgent(model=model, run_script=False), USER)
    finally:
        await model.aclose()
    done = done_of(events)
    assert done.reason == "error"
    assert done.error is not None
    return done.error


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_server_that_closes_every_connection_is_model_unavailable(
    api: str, stream: bool
) -> None:
    async with closing_server() as (root, accepted):
        error = await run_once(adapter(api, root, stream=stream))
    assert error["code"] == "model_unavailable", error
    assert "cannot be reached" in str(error["message"])
    assert len(accepted) >= 2  # the first request and its one retry


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_connection_is_model_unavailable(api: str) -> None:
    error = await run_once(adapter(api, refused_root(), stream=True))
    assert error["code"] == "model_unavailable", error
    assert "cannot be reached" in str(error["message"])
