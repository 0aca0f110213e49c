"""ToolManager under hostile use: what a new user or a misbehaving tool does (docs/tools.md).

Each test here started as a failing reproduction of a defect found by reviewing the tool core.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import jsonschema
import pytest

import sagents.tool.tool_manager as tool_manager_module
from sagents.tool import ToolManager, get_tool_manager
from sagents.tool.tool_base import tool


def exits() -> str:
    sys.exit(3)


async def exits_async() -> str:
    raise SystemExit("bye")


def numbers() -> list[int]:
    return [1, 2]


def count() -> int:
    return 3


def pair() -> tuple[int, str] | None:
    return (1, "a")


def maybe_number() -> int | None:
    return None


def add(a: int) -> int:
    return a


@pytest.mark.anyio
@pytest.mark.parametrize("function", [exits, exits_async])
async def test_a_tool_calling_sys_exit_gives_an_execution_error_instead_of_ending_the_caller(
    function: Any,
) -> None:
    async with ToolManager() as tm:
        tm.register_tool(function)
        with anyio.fail_after(5):
            result = await tm.run_tool(function.__name__)
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "SystemExit" in result.error.message


@pytest.mark.anyio
async def test_arguments_nested_too_deeply_for_the_parser_are_invalid_arguments() -> None:
    async with ToolManager() as tm:
        tm.register_tool(add)
        result = await tm.run_tool("add", "[" * 100_000)
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "nested too deeply" in result.error.message


@pytest.mark.anyio
async def test_a_deeply_nested_mapping_of_arguments_is_invalid_arguments() -> None:
    nested: dict[str, Any] = {}
    inner = nested
    for _ in range(5_000):
        inner["x"] = {}
        inner = inner["x"]
    async with ToolManager() as tm:
        tm.register_tool(add)
        result = await tm.run_tool("add", {"a": 1, "deep": nested})
    assert result.error is not None
    assert result.error.code == "invalid_arguments"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("function", "wrapped"),
    [(numbers, [1, 2]), (count, 3), (pair, [1, "a"])],
)
async def test_a_non_object_return_is_sent_wrapped_as_its_output_schema_says(
    function: Any, wrapped: Any
) -> None:
    async with ToolManager() as tm:
        spec = tm.register_tool(function)
        result = await tm.run_tool(function.__name__)
    assert spec.output_schema is not None
    assert result.structured == {"result": wrapped}
    jsonschema.validate(result.structured, spec.output_schema)
    assert result.to_tool_message() == result.text  # the model still sees the bare value


@pytest.mark.anyio
async def test_a_wrapped_return_of_none_still_matches_the_output_schema() -> None:
    async with ToolManager() as tm:
        spec = tm.register_tool(maybe_number)
        result = await tm.run_tool("maybe_number")
    assert spec.output_schema is not None
    assert result.structured == {"result": None}
    jsonschema.validate(result.structured, spec.output_schema)


def test_threads_asking_for_the_default_manager_at_once_all_get_the_same_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tool_manager_module, "_default_manager", None)
    created: list[object] = []
    original = ToolManager.__init__

    def slow_init(self: ToolManager, **kwargs: Any) -> None:
        created.append(self)
        threading.Event().wait(0.05)  # widens the race window; nothing waits on it
        original(self, **kwargs)

    monkeypatch.setattr(ToolManager, "__init__", slow_init)
    start = threading.Barrier(4, timeout=10)
    got: list[ToolManager] = []

    def ask() -> None:
        start.wait()
        got.append(get_tool_manager())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(got) == 4
    assert len({id(manager) for manager in got}) == 1
    assert len(created) == 1


async def stray_cancellation() -> str:
    # A future that some other code cancelled: awaiting it raises CancelledError although
    # nobody cancels the calling task.
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    future.cancel()
    return await future


async def hang() -> str:
    await anyio.sleep_forever()
    return "never"


@pytest.mark.anyio
async def test_a_stray_cancellation_from_a_tool_is_an_execution_error_not_a_crash() -> None:
    async with ToolManager() as tm:
        tm.register_tool(stray_cancellation)
        with anyio.fail_after(5):
            result = await tm.run_tool("stray_cancellation")
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "not cancelled" in result.error.message


@pytest.mark.anyio
async def test_cancelling_the_caller_through_a_scope_still_propagates() -> None:
    reached: list[str] = []
    async with ToolManager() as tm:
        tm.register_tool(hang)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await tm.run_tool("hang")
                    reached.append("returned")  # must not happen: cancellation propagates

                tg.start_soon(call)
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
    assert reached == []


@pytest.mark.anyio
async def test_cancelling_the_caller_task_with_asyncio_still_propagates() -> None:
    async with ToolManager() as tm:
        tm.register_tool(hang)
        task = asyncio.ensure_future(tm.run_tool("hang"))
        with anyio.fail_after(5):
            await anyio.wait_all_tasks_blocked()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


@pytest.mark.anyio
async def test_an_unexpected_argument_is_named_at_its_own_path_with_the_declared_ones() -> None:
    async with ToolManager() as tm:
        tm.register_tool(add)
        result = await tm.run_tool("add", {"a": 1, "b": 2, "c/d": "x"})
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    problems = result.error.details["problems"]
    assert problems == [
        {"path": "/b", "expected": "no such property (declared: a)", "got": "2 (integer)"},
        {"path": "/c~1d", "expected": "no such property (declared: a)", "got": '"x" (string)'},
    ]
    assert "Additional properties" not in result.error.message


def test_a_discovered_tool_naming_a_later_alias_is_logged_then_collected_once_defined(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # CorefixLaterAlias does not exist yet: the test defines it after the first collection.
    @tool
    def later(value: CorefixLaterAlias) -> str:  # type: ignore[name-defined]  # noqa: F821
        return str(value)

    tm = ToolManager()
    with caplog.at_level(logging.ERROR, logger="sagents.tool.tool_manager"):
        added = tm.collect_discovered()  # must not raise: one bad tool, the others still come
    assert "later" not in added
    assert "get_weather_hostile" in added
    assert any("CorefixLaterAlias" in r.getMessage() for r in caplog.records)
    globals()["CorefixLaterAlias"] = int  # the alias, defined after the first collection
    assert tm.collect_discovered() == ["later"]
    assert tm.get_tool_spec("later").input_schema["properties"]["value"]["type"] == "integer"


@tool
def get_weather_hostile(city: str) -> str:
    return city


@contextlib.asynccontextmanager
async def _with_task_group() -> AsyncIterator[str]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep_forever)
        yield "resource"
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_closing_from_another_task_than_the_contexts_owner_is_a_clear_error() -> None:
    tm = ToolManager()
    owner_may_close = anyio.Event()
    closed_by_owner = anyio.Event()

    async def owner() -> None:
        await tm.enter_async_context(_with_task_group())
        await owner_may_close.wait()
        await tm.aclose()
        closed_by_owner.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner)
            await anyio.wait_all_tasks_blocked()
            with pytest.raises(RuntimeError, match="must run in the task that entered"):
                await tm.aclose()
            with pytest.raises(RuntimeError, match="must run in the task that entered"):
                await tm.enter_async_context(_with_task_group())
            assert not tm.closed  # the owner can still close it
            owner_may_close.set()
            await closed_by_owner.wait()
    assert tm.closed


@pytest.mark.anyio
async def test_contexts_entered_and_closed_in_one_task_close_normally() -> None:
    async with ToolManager() as tm:
        assert await tm.enter_async_context(_with_task_group()) == "resource"
    assert tm.closed


@pytest.mark.anyio
async def test_a_cancelled_caller_still_runs_every_close_callback_to_the_end() -> None:
    finished: list[str] = []

    async def release(label: str) -> None:
        await anyio.lowlevel.checkpoint()  # would raise if not shielded
        finished.append(label)

    tm = ToolManager()
    tm.push_async_callback(lambda: release("first"))
    tm.push_async_callback(lambda: release("second"))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await tm.aclose()
    assert finished == ["second", "first"]
    assert tm.closed


class _UnprintableError(Exception):
    def __str__(self) -> str:
        raise AttributeError("no message attribute")


def raises_unprintable() -> str:
    raise _UnprintableError


@pytest.mark.anyio
async def test_an_exception_whose_str_fails_still_becomes_an_execution_error() -> None:
    async with ToolManager() as tm:
        tm.register_tool(raises_unprintable)
        result = await tm.run_tool("raises_unprintable")
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "_UnprintableError" in result.error.message
