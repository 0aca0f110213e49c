"""The shape of a gateway call, measured on a running gateway (docs/architecture.md).

    python scripts/gateway_call_path.py [--background-after SECONDS]

Opens the gateway ``sagents serve`` runs (``open_gateway``, ``--mode auto``; with
``--background-after``, calls still running after that many seconds are handed off, as
``backgroundCalls.autoAfterSec`` does) with one upstream
stdio server (``tests/mcp/servers/fault_server.py``, its ``echo`` tool), talks to it with the
``mcp`` SDK's in-memory client, and prints:

- ``hops``: the frames from the handler the SDK's server runner calls for ``tools/call`` (after
  the middleware every request crosses) to the caller of the SDK client's
  ``ClientSession.call_tool`` that reaches the upstream, for one ``echo__echo`` call, each
  printed as ``module:function``;
- ``task_groups``: the task groups created while one ``run_script`` (one ``echo__echo`` call
  from the script) is served, after a first run of the same session opened its sandbox; each
  printed with the function that created it. Only where bubblewrap runs (else: skipped).

Not a test: nothing is asserted. Run it on two checkouts (``PYTHONPATH=<checkout>``) to compare.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
from mcp import Client
from mcp.client.session import ClientSession

from sagents.gateway import GatewaySettings, open_gateway

ROOT = Path(__file__).resolve().parents[1]
FAULT = ROOT / "tests" / "mcp" / "servers" / "fault_server.py"
SCRIPT = 'from agent_tools import call\nprint(call("echo__echo", {"text": "x"}))'


def _frames_to_sdk_call() -> list[str]:
    """``module:function`` of the frames of this task, outermost first, from the handler the
    SDK's runner calls (after ``mcp.server.runner:_inner``) to the caller of
    ``ClientSession.call_tool``."""
    names: list[str] = []
    frame: FrameType | None = sys._getframe(2)  # the caller of the patched call_tool
    while frame is not None:
        module = frame.f_globals.get("__name__", "?")
        names.append(f"{module}:{frame.f_code.co_name}")
        frame = frame.f_back
    names.reverse()
    inner = [i for i, name in enumerate(names) if name == "mcp.server.runner:_inner"]
    return names[inner[-1] + 1 :] if inner else names


async def main(background_after_s: float | None) -> None:
    captured: list[list[str]] = []
    original = ClientSession.call_tool

    async def recording(self: ClientSession, *args: Any, **kwargs: Any) -> Any:
        captured.append(_frames_to_sdk_call())
        return await original(self, *args, **kwargs)

    ClientSession.call_tool = recording  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as data:
        config = Path(data) / "mcp_servers.json"
        server = {"command": sys.executable, "args": [str(FAULT)], "permission": "read_only"}
        config.write_text(json.dumps({"mcpServers": {"echo": server}}))
        settings = GatewaySettings(
            config=config,
            mode="auto",
            workspace=Path(data) / "ws",
            background_after_s=background_after_s,
        )
        async with open_gateway(settings) as gateway, Client(gateway.server) as client:
            await client.call_tool("echo__echo", {"text": "x"})
            hops = captured[-1]
            print(f"hops {len(hops)}")
            for name in hops:
                print(f"  {name}")
            tools = {tool.name for tool in (await client.list_tools()).tools}
            if "run_script" not in tools:
                print("task_groups skipped: run_script is not offered (no sandbox)")
                return
            arguments = {"code": SCRIPT, "tools": ["echo__echo"], "description": "echo once"}
            first = await client.call_tool("run_script", arguments)
            assert not first.is_error, first
            created: list[str] = []
            with _counting_task_groups(created):
                result = await client.call_tool("run_script", arguments)
            assert not result.is_error, result
            print(f"task_groups {len(created)}")
            for name in created:
                print(f"  {name}")


@contextmanager
def _counting_task_groups(created: list[str]) -> Iterator[None]:
    """Record in ``created`` the caller of each ``anyio.create_task_group()`` in the block."""
    original = anyio.create_task_group

    def counting() -> Any:
        caller = sys._getframe(1)
        created.append(f"{caller.f_globals.get('__name__', '?')}:{caller.f_code.co_name}")
        return original()

    anyio.create_task_group = counting
    try:
        yield
    finally:
        anyio.create_task_group = original


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--background-after", type=float, default=None, metavar="SECONDS")
    anyio.run(main, parser.parse_args().background_after)
