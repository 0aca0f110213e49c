"""Helpers of the AG-UI route's tests: the route served on loopback against a scripted model,
and its SSE stream read back into the ``ag-ui-protocol`` package's event types."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
from ag_ui.core import Event
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request

from sagents.agent import SAgent
from sagents.agent.ag_ui import Authorize, ag_ui_app
from sagents.gateway._http_server import serve_asgi
from sagents.gateway._settings import GatewaySettings
from sagents.tool import emit_tool_progress
from sagents.tool.tool_base import tool
from sagents.tool.tool_manager import ToolManager

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
TOKEN = "ag-ui-test-token"
WAIT_S = 60.0


@tool(permission="read_only")
async def build(target: str) -> str:
    """Build a target, printing as it goes.

    Args:
        target: What to build.
    """
    await emit_tool_progress(f"compiling {target}\n", stream="stdout")
    await emit_tool_progress("warning: <b>deprecated</b>\n", stream="stderr")
    await emit_tool_progress("linking\n", stream="stdout")
    return f"built {target}"


@tool(permission="write")
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"


@tool(permission="read_only")
async def wait_forever(seconds: float) -> str:
    """Wait.

    Args:
        seconds: How long.
    """
    await emit_tool_progress("waiting\n", stream="stdout")
    await anyio.sleep(seconds)
    return "waited"


def route_tools() -> ToolManager:
    manager = ToolManager()
    for fn in (build, delete_file, wait_forever):
        manager.register_tool(fn)
    return manager


async def bearer_only(request: Request) -> str | None:
    """The tests' authorize: the one bearer token is the one identity."""
    given = request.headers.get("authorization", "")
    return "tester" if given == f"Bearer {TOKEN}" else None


@dataclass
class Served:
    url: str
    agent: SAgent


@asynccontextmanager
async def serve_route(
    agent: SAgent,
    data_dir: Path,
    manager: ToolManager,
    *,
    authorize: Authorize = bearer_only,
    **options: Any,
) -> AsyncIterator[str]:
    """The AG-UI app on 127.0.0.1 (``options`` as :func:`ag_ui_app`'s); yields its URL."""
    app = ag_ui_app(agent, authorize=authorize, tool_manager=manager, data_dir=data_dir, **options)
    async with serve_app(app) as base:
        yield f"{base}/ag-ui"


@asynccontextmanager
async def serve_app(app: Starlette) -> AsyncIterator[str]:
    """A Starlette app on 127.0.0.1; yields its base URL."""
    settings = GatewaySettings(transport="http", host="127.0.0.1", port=0)
    async with anyio.create_task_group() as tg:
        port = await tg.start(lambda task_status: serve_asgi(lambda _p: app, settings,
                                                             task_status=task_status))  # fmt: skip
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


def run_input(
    thread_id: str,
    messages: list[dict[str, Any]],
    *,
    run_id: str = "run-1",
    forwarded: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": forwarded or {},
    }


async def post_run(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[Any]:
    """POST one RunAgentInput; the stream's events, each parsed by the protocol's types."""
    events: list[Any] = []
    with anyio.fail_after(WAIT_S):
        async with client.stream(
            "POST",
            url,
            json=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream"},
        ) as response:
            if response.status_code != 200:
                await response.aread()
                raise AssertionError(f"HTTP {response.status_code}: {response.text}")
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(EVENTS.validate_python(json.loads(line[6:])))
    return events


async def race(
    client: httpx.AsyncClient, posts: list[tuple[str, dict[str, Any]]]
) -> list[list[Any] | str]:
    """POST each ``(url, body)`` at once; per post, its events, or the refusal's text
    (``HTTP status: body``), in the order they ended."""
    outcomes: list[list[Any] | str] = []

    async def send(url: str, body: dict[str, Any]) -> None:
        try:
            outcomes.append(await post_run(client, url, body))
        except AssertionError as refused:  # post_run's non-200
            outcomes.append(str(refused))

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            for url, body in posts:
                tg.start_soon(send, url, body)
    return outcomes


def types_of(events: list[Any]) -> list[str]:
    return [str(e.type.value) for e in events]


def customs(events: list[Any], name: str) -> list[Any]:
    return [e.value for e in events if e.type.value == "CUSTOM" and e.name == name]
