"""``sagents`` with a timeline of each forwarded call: run as ``python _serve_timeline.py serve
...`` by ``bench_serve_path.py``; writes ``SERVE_TIMELINE_OUT`` at exit (one ``ns label`` a
line). Benchmark instrumentation only: it wraps private functions of the SDK and of sagents, and
skips any it cannot find.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

_clock = time.perf_counter_ns
_log: list[tuple[int, str]] = []
_read, _write = os.read, os.write


def _timed_read(fd: int, n: int) -> bytes:
    data = _read(fd, n)
    if data:
        _log.append((_clock(), f"read{fd}"))
    return data


def _timed_write(fd: int, data: Any) -> int:
    written = _write(fd, data)
    _log.append((_clock(), f"write{fd}"))
    return written


def _wrap(module: str, owner: str, name: str, label: str) -> None:
    try:
        cls = getattr(importlib.import_module(module), owner)
        original: Callable[..., Coroutine[Any, Any, Any]] = getattr(cls, name)
    except (ImportError, AttributeError):
        return

    @functools.wraps(original)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        _log.append((_clock(), label + ">"))
        try:
            return await original(*args, **kwargs)
        finally:
            _log.append((_clock(), label + "<"))

    setattr(cls, name, timed)


STEPS = [
    ("mcp.shared.jsonrpc_dispatcher", "JSONRPCDispatcher", "_handle_request", "sdk_handle"),
    ("mcp.server.runner", "ServerRunner", "_on_request", "sdk_runner"),
    ("sagents.gateway._server", "Gateway", "_on_call_tool", "gateway"),
    ("sagents.tool._tool_proxy", "ToolProxy", "run_tool", "tool_proxy"),
    ("sagents.tool.tool_manager", "ToolManager", "run_tool", "tool_manager"),
    ("sagents.mcp._supervisor", "MCPSupervisor", "_call", "supervisor"),
    ("mcp.client.session", "ClientSession", "send_request", "sdk_client"),
]


def _dump() -> None:
    with open(os.environ["SERVE_TIMELINE_OUT"], "w") as out:
        out.writelines(f"{t} {label}\n" for t, label in _log)


if __name__ == "__main__":
    os.read, os.write = _timed_read, _timed_write
    for step in STEPS:
        _wrap(*step)
    atexit.register(_dump)
    from sagents.cli.main import main

    sys.argv = ["sagents", *sys.argv[1:]]
    main()
