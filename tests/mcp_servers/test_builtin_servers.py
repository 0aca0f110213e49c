"""The memory and todo MCP servers through a real stdio client (our ToolManager), running the
same checks as the in-process tools."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters

from sagents.audit import SqliteAuditStore
from sagents.tool import ToolManager
from tests.tool.impl import conformance_memory_todo as checks

pytestmark = pytest.mark.anyio

Start = Callable[..., Awaitable[str]]


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[ToolManager, Start]]:
    """A manager and ``start(module, **identity) -> server name`` registering one server."""
    async with AsyncExitStack() as stack:
        manager = await stack.enter_async_context(ToolManager())
        count = 0

        async def start(module: str, **identity: str) -> str:
            nonlocal count
            count += 1
            name = f"s{count}"
            args = ["-m", f"sagents.mcp_servers.{module}", "--db", str(tmp_path / f"{module}.db")]
            for key, value in identity.items():
                args += [f"--{key}", value]
            params = StdioServerParameters(
                command=sys.executable,
                args=args,
                env={"SAGENTS_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"},
            )
            with anyio.fail_after(60):
                await manager.register_mcp_server(name=name, params=params)
            return name

        yield manager, start


def _caller(manager: ToolManager) -> checks.Call:
    async def call(tool: str, arguments: dict[str, Any], server: Any) -> tuple[Any, str | None]:
        with anyio.fail_after(30):
            result = await manager.run_tool(f"{server}__{tool}", arguments)
        code = None
        if result.is_error:
            code = (result.meta.get("sagents/error") or {}).get("code", "tool_error")
        return result.structured, code

    return call


async def test_the_servers_list_the_builtin_schemas(servers: tuple[ToolManager, Start]) -> None:
    from sagents.tool.impl import BuiltinTools

    manager, start = servers
    memory = await start("memory", user="alice")
    todo = await start("todo")
    names = set(manager.list_all_tools_name())
    assert {
        f"{memory}__memory_store",
        f"{memory}__memory_search",
        f"{memory}__memory_delete",
    } <= names
    assert {f"{todo}__todo_write", f"{todo}__todo_read"} <= names
    local = BuiltinTools(None)
    for tool in ("memory_store", "todo_write"):
        server = memory if tool.startswith("memory") else todo
        assert (
            manager.get_tool_spec(f"{server}__{tool}").input_schema == local.spec(tool).input_schema
        )


async def test_fts_ranks_the_relevant_memory_first(servers: tuple[ToolManager, Start]) -> None:
    manager, start = servers
    await checks.check_fts_ranks_the_relevant_memory_first(
        _caller(manager), await start("memory", user="alice")
    )


async def test_dedup_within_a_scope(servers: tuple[ToolManager, Start]) -> None:
    manager, start = servers
    await checks.check_dedup_within_a_scope(_caller(manager), await start("memory", user="alice"))


async def test_users_never_see_each_other(
    servers: tuple[ToolManager, Start], tmp_path: Path
) -> None:
    manager, start = servers
    alice = await start("memory", user="alice")
    bob = await start("memory", user="bob")  # same database file, another user
    await checks.check_users_never_see_each_other(_caller(manager), alice, bob)
    entries = await SqliteAuditStore(path=tmp_path / "audit.sqlite3").entries()
    assert {e.kind for e in entries} == {"memory_write"}


async def test_delete(servers: tuple[ToolManager, Start]) -> None:
    manager, start = servers
    await checks.check_delete(_caller(manager), await start("memory", user="alice"))


async def test_todo_cycles_and_unknown_ids_are_refused(servers: tuple[ToolManager, Start]) -> None:
    manager, start = servers
    await checks.check_todo_cycles_and_unknown_ids_are_refused(
        _caller(manager), await start("todo")
    )


async def test_todo_update_and_two_agents_share_one_list(
    servers: tuple[ToolManager, Start],
) -> None:
    manager, start = servers
    call = _caller(manager)
    lead = await start("todo", session="s1", agent="lead")
    await checks.check_todo_update_changes_only_given_fields(call, lead)
    helper = await start("todo", session="s1", agent="helper")
    await call("todo_write", {"items": [{"id": "h", "content": "help"}]}, helper)
    listed, _ = await call("todo_read", {}, lead)
    assert [(i["id"], i["owner"]) for i in listed["items"]] == [
        ("a", "lead"),
        ("t1", "lead"),
        ("h", "helper"),
    ]
    other = await start("todo", session="s2")
    listed, _ = await call("todo_read", {}, other)
    assert listed["items"] == []
