"""Registration of the built-in tools: specs, permission classes, one sandbox per session."""

from __future__ import annotations

from contextlib import AsyncExitStack
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from sagents.cli._chat_tools import CHAT_BUILTIN_TOOL_NAMES
from sagents.errors import ToolNameConflictError
from sagents.sandbox import Sandbox, create_sandbox
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import (
    BUILTIN_TOOL_NAMES,
    DEFAULT_BUILTIN_TOOL_NAMES,
    BuiltinSettings,
    BuiltinTools,
    register_builtin_tools,
    single_sandbox,
)
from sagents.tool.impl._builtin import BUILTINS

pytestmark = pytest.mark.anyio


async def _unused(context: SessionContext) -> Sandbox:
    raise AssertionError("no sandbox is needed to build specs")


def test_every_builtin_spec_is_marked_builtin_with_its_permission_class() -> None:
    tools = BuiltinTools(_unused)
    classes = {name: tools.spec(name).permission for name in BUILTIN_TOOL_NAMES}
    assert classes == {
        "execute_shell_command": "write",
        "await_shell": "read_only",
        "kill_shell": "write",
        "file_read": "read_only",
        "file_write": "write",
        "file_update": "write",
        "list_dir": "read_only",
        "glob": "read_only",
        "grep": "read_only",
        "web_fetch": "read_only",
        "memory_store": "write",
        "memory_search": "read_only",
        "memory_delete": "write",
        "todo_write": "write",
        "todo_read": "read_only",
        "image_understanding": "read_only",
        "compress_history": "read_only",
        "questionnaire": "read_only",
        "datetime_now": "read_only",
    }
    assert {tools.spec(n).source.kind for n in BUILTIN_TOOL_NAMES} == {"builtin"}
    assert tools.spec("file_read").annotations.read_only_hint is True


def test_shell_permission_can_be_raised_to_destructive() -> None:
    tools = BuiltinTools(_unused, shell_permission="destructive")
    assert tools.spec("execute_shell_command").permission == "destructive"
    assert tools.spec("execute_shell_command").annotations.destructive_hint is True
    assert tools.spec("await_shell").permission == "read_only"


def test_registered_tools_export_for_openai_in_both_modes() -> None:
    manager = ToolManager()
    names = register_builtin_tools(manager, _unused).register(
        ToolManager(), names=["file_read", "grep"]
    )
    assert names == ["file_read", "grep"]
    assert sorted(manager.list_all_tools_name()) == sorted(DEFAULT_BUILTIN_TOOL_NAMES)
    every = ToolManager()
    register_builtin_tools(every, _unused, names=BUILTIN_TOOL_NAMES)
    exported = {t["function"]["name"] for t in every.get_openai_tools(strict=True)}
    assert exported == set(BUILTIN_TOOL_NAMES)
    assert len(every.get_openai_tools(strict=False)) == len(BUILTIN_TOOL_NAMES)


def test_registering_twice_is_a_name_conflict() -> None:
    manager = ToolManager()
    register_builtin_tools(manager, _unused, names=["glob"])
    with pytest.raises(ToolNameConflictError):
        register_builtin_tools(manager, _unused, names=["glob"])


def test_an_unknown_builtin_name_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(KeyError, match="file_read"):
        BuiltinTools(_unused).tools(["rm_rf"])


def test_the_name_lists_are_read_from_the_registry() -> None:
    assert tuple(builtin.name for builtin in BUILTINS) == BUILTIN_TOOL_NAMES
    assert DEFAULT_BUILTIN_TOOL_NAMES == (
        "execute_shell_command",
        "await_shell",
        "kill_shell",
        "file_read",
        "file_write",
        "file_update",
        "list_dir",
        "glob",
        "grep",
    )
    assert CHAT_BUILTIN_TOOL_NAMES == (
        "web_fetch",
        "memory_store",
        "memory_search",
        "memory_delete",
        "todo_write",
        "todo_read",
        "compress_history",
        "questionnaire",
        "datetime_now",
    )
    assert [b.name for b in BUILTINS if b.not_served] == ["compress_history"]


async def test_datetime_now_is_off_by_default_and_tells_the_time_in_a_zone() -> None:
    default = ToolManager()
    register_builtin_tools(default, _unused)
    assert not default.has_tool("datetime_now")
    manager = ToolManager()
    register_builtin_tools(manager, None, names=["datetime_now"])
    spec = manager.get_tool_spec("datetime_now")
    assert spec.permission == "read_only"
    assert spec.input_schema["properties"]["timezone"]["description"].startswith("An IANA")
    before = datetime.now(ZoneInfo("Asia/Tokyo")).replace(microsecond=0)
    result = await manager.run_tool("datetime_now", {"timezone": "Asia/Tokyo"}, SessionContext())
    after = datetime.now(ZoneInfo("Asia/Tokyo"))
    assert not result.is_error, result.text
    stamp, _, rest = result.text.partition(" ")
    told = datetime.fromisoformat(stamp)
    assert told.utcoffset() == timedelta(hours=9)
    assert before <= told <= after
    assert rest == f"({told:%A}, Asia/Tokyo)"
    utc = await manager.run_tool("datetime_now", {}, SessionContext())
    assert utc.text.endswith(", UTC)")
    assert datetime.fromisoformat(utc.text.split(" ")[0]).utcoffset() == timedelta(0)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../etc/passwd", "", "Europe"])
async def test_datetime_now_refuses_an_unknown_zone_with_a_clear_error(zone: str) -> None:
    manager = ToolManager()
    register_builtin_tools(manager, None, names=["datetime_now"])
    result = await manager.run_tool("datetime_now", {"timezone": zone}, SessionContext())
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "unknown time zone" in result.error.message


@pytest.mark.parametrize("field", ["shell_tail_bytes", "grep_max_matches", "shell_poll_seconds"])
def test_settings_refuse_non_positive_caps(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        BuiltinSettings(**{field: 0})


async def test_each_session_works_in_its_own_sandbox() -> None:
    async with AsyncExitStack() as stack:
        boxes: dict[str, Sandbox] = {}

        async def sandbox_for(context: SessionContext) -> Sandbox:
            if context.session_id not in boxes:
                box = create_sandbox("memory", workspace=f"/ws/{context.session_id}")
                boxes[context.session_id] = await stack.enter_async_context(box)
            return boxes[context.session_id]

        manager = ToolManager()
        register_builtin_tools(manager, sandbox_for)
        alice, bob = SessionContext(session_id="alice"), SessionContext(session_id="bob")
        wrote = await manager.run_tool("file_write", {"path": "a.txt", "content": "A"}, alice)
        assert not wrote.is_error, wrote.text
        assert not (await manager.run_tool("file_read", {"path": "a.txt"}, alice)).is_error
        seen_by_bob = await manager.run_tool("file_read", {"path": "a.txt"}, bob)
        assert seen_by_bob.error is not None
        assert seen_by_bob.error.code == "file_not_found"
        assert await boxes["alice"].read_file("a.txt") == b"A"


async def test_single_sandbox_gives_every_session_the_same_one() -> None:
    async with create_sandbox("memory", workspace="/ws") as box:
        resolve = single_sandbox(box)
        assert await resolve(SessionContext()) is await resolve(SessionContext())
