"""ToolManager: registration, export, the call path and its error results (docs/tools.md;
docs/architecture.md, "Where errors become results")."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import json
import logging
import pathlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pydantic
import pytest

from sagents.core._result import ImageContent, TextContent, ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import (
    SagentsError,
    ToolDefinitionError,
    ToolManagerClosedError,
    ToolNameConflictError,
    UnknownToolError,
)
from sagents.tool import SessionContext, ToolManager, ToolProvider, get_tool_manager
from sagents.tool._arguments import MAX_ARGUMENTS_BYTES
from sagents.tool._handler import ToolCall
from sagents.tool.openai_export import to_openai_tool
from sagents.tool.tool_base import tool


@tool(name="get_weather", description="按城市名查询天气")
async def get_weather(city: str) -> dict:  # type: ignore[type-arg]  # the seed example, verbatim
    return {"city": city, "temp_c": 23, "condition": "sunny"}


def add(a: int, b: float = 1.0) -> float:
    """Add two numbers."""
    return a + b


async def echo(text: str) -> str:
    return text


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Model(pydantic.BaseModel):
    name: str
    when: datetime.date


def _text(result: ToolResult) -> str:
    return result.to_tool_message()


@pytest.mark.anyio
async def test_seed_example_registers_exports_and_runs() -> None:
    tm = ToolManager()
    tm.register_tool(get_weather)
    exported = {t["function"]["name"]: t for t in tm.get_openai_tools()}
    assert exported["get_weather"]["type"] == "function"
    assert exported["get_weather"]["function"]["description"] == "按城市名查询天气"
    assert exported["get_weather"]["function"]["parameters"]["required"] == ["city"]
    result = await tm.run_tool("get_weather", {"city": "北京"})
    assert not result.is_error
    assert result.structured == {"city": "北京", "temp_c": 23, "condition": "sunny"}
    assert json.loads(result.to_tool_message())["city"] == "北京"


@pytest.mark.anyio
async def test_the_process_default_manager_collects_imported_tools() -> None:
    tm = get_tool_manager()
    assert tm is get_tool_manager()
    assert "get_weather" in tm.list_all_tools_name()
    result = await tm.run_tool("get_weather", '{"city": "Paris"}')
    assert result.structured is not None
    assert result.structured["city"] == "Paris"


def test_a_discovered_duplicate_name_is_logged_and_not_collected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(name="duplicate_tool_name")
    def first() -> str:
        return "first"

    @tool(name="duplicate_tool_name")
    def second() -> str:
        return "second"

    tm = ToolManager()
    with caplog.at_level(logging.ERROR, logger="sagents.tool.tool_manager"):
        added = tm.collect_discovered()
    assert added.count("duplicate_tool_name") == 1
    assert any("'duplicate_tool_name'" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_decorated_function_stays_callable() -> None:
    assert (await get_weather("Paris"))["city"] == "Paris"


def test_a_new_manager_holds_only_what_it_is_given() -> None:
    tm = ToolManager()
    assert tm.list_all_tools_name() == []
    tm.register_tool(add)
    assert tm.list_all_tools_name() == ["add"]


def test_two_managers_do_not_affect_each_other() -> None:
    first, second = ToolManager(), ToolManager()
    first.register_tool(add)
    second.register_tool(echo)
    second.unregister_tool("echo")
    assert first.list_all_tools_name() == ["add"]
    assert second.list_all_tools_name() == []


def test_a_name_collision_is_refused_unless_replacing() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    with pytest.raises(ToolNameConflictError, match="'add'"):
        tm.register_tool(add)
    spec = ToolSpec(name="add", description="replacement")
    tm.register_tool((spec, _StaticHandler("x")), replace=True)
    assert tm.get_tool_spec("add").description == "replacement"


def test_registering_something_that_is_not_a_tool_is_a_clear_error() -> None:
    with pytest.raises(ToolDefinitionError, match="cannot register"):
        ToolManager().register_tool(42)  # type: ignore[arg-type]  # the bad input under test


def test_a_spec_with_an_invalid_schema_is_refused_at_registration() -> None:
    spec = ToolSpec(name="bad", input_schema={"type": "object", "properties": {"a": {"type": 5}}})
    with pytest.raises(ToolDefinitionError, match="'bad'"):
        ToolManager().register_tool((spec, _StaticHandler("x")))


def test_unregistering_an_unknown_tool_raises() -> None:
    with pytest.raises(UnknownToolError):
        ToolManager().unregister_tool("nope")


def test_openai_tools_are_sorted_and_use_exported_names() -> None:
    tm = ToolManager()
    for name in ("zeta", "alpha", "fleet.get/status"):
        tm.register_tool((ToolSpec(name=name), _StaticHandler(name)))
    names = [t["function"]["name"] for t in tm.get_openai_tools()]
    assert names[:1] == ["alpha"]
    assert all(pydantic.TypeAdapter(str).validate_python(n) for n in names)
    odd = names[1]
    assert odd != "fleet.get/status"
    assert tm.resolve_exported_name(odd) == "fleet.get/status"
    assert names[2] == "zeta"


def test_openai_tools_can_be_modified_by_the_caller_without_harm() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    tm.get_openai_tools()[0]["function"]["name"] = "changed"
    assert tm.get_openai_tools()[0]["function"]["name"] == "add"


@pytest.mark.anyio
async def test_run_tool_accepts_an_exported_name() -> None:
    tm = ToolManager()
    tm.register_tool((ToolSpec(name="a.b"), _StaticHandler("done")))
    exported = tm.get_openai_tools()[0]["function"]["name"]
    assert _text(await tm.run_tool(exported, {})) == "done"


@pytest.mark.anyio
async def test_run_tool_accepts_json_text_and_coerces_common_mistakes() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    result = await tm.run_tool("add", '{"a": "5", "b": "2.5"}')
    assert result.structured == {"result": 7.5}  # "-> float": wrapped


@pytest.mark.anyio
async def test_unknown_tool_is_an_error_result_with_a_suggestion() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    result = await tm.run_tool("ad", {})
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert "'add'" in (result.error.hint or "")


@pytest.mark.anyio
async def test_wrong_and_missing_arguments_are_listed_in_one_error() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    result = await tm.run_tool("add", {"b": "many"})
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    paths = {p["path"] for p in result.error.details["problems"]}
    assert paths == {"/a", "/b"}
    assert "/a" in result.error.message
    assert "/b" in result.error.message


@pytest.mark.anyio
async def test_arguments_that_are_not_json_give_a_clear_error() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    result = await tm.run_tool("add", "{a: 1")
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "not valid JSON" in result.error.message


@pytest.mark.anyio
async def test_ten_megabyte_arguments_are_refused_quickly() -> None:
    tm = ToolManager()
    tm.register_tool(echo)
    big = "x" * (10 * 1024 * 1024)
    assert len(big) > MAX_ARGUMENTS_BYTES
    with anyio.fail_after(10):
        as_dict = await tm.run_tool("echo", {"text": big})
        as_text = await tm.run_tool("echo", json.dumps({"text": big}))
    for result in (as_dict, as_text):
        assert result.error is not None
        assert result.error.code == "invalid_arguments"
        assert "too large" in result.error.message


@pytest.mark.anyio
async def test_a_tool_that_raises_becomes_an_error_result_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(n: int) -> int:
        raise RuntimeError(f"disk on fire ({n})")

    tm = ToolManager()
    tm.register_tool(explode)
    with caplog.at_level(logging.ERROR, logger="sagents.tool.tool_manager"):
        result = await tm.run_tool("explode", {"n": 3})
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "disk on fire (3)" in result.to_tool_message()
    assert "Traceback" not in result.to_tool_message()
    assert any(r.exc_info for r in caplog.records)  # the traceback goes to the log


@pytest.mark.anyio
async def test_a_hanging_async_tool_times_out() -> None:
    async def hang() -> str:
        await anyio.sleep_forever()
        return "never"

    tm = ToolManager()
    tm.register_tool(hang)
    with anyio.fail_after(10):
        result = await tm.run_tool("hang", {}, timeout=0.05)
    assert result.error is not None
    assert result.error.code == "timeout"
    assert "'hang'" in result.error.message


@pytest.mark.anyio
async def test_a_hanging_sync_tool_times_out_and_its_thread_is_abandoned() -> None:
    release = threading.Event()

    def block() -> str:
        release.wait(30)
        return "late"

    tm = ToolManager()
    tm.register_tool(block)
    try:
        with anyio.fail_after(10):
            result = await tm.run_tool("block", {}, timeout=0.05)
    finally:
        release.set()
    assert result.error is not None
    assert result.error.code == "timeout"


@pytest.mark.anyio
async def test_cancelling_the_caller_propagates_into_the_tool() -> None:
    started = anyio.Event()
    saw_cancel: list[bool] = []
    results: list[ToolResult] = []

    async def wait_forever() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            saw_cancel.append(True)
            raise
        return "never"

    tm = ToolManager()
    tm.register_tool(wait_forever)

    async def call() -> None:
        results.append(await tm.run_tool("wait_forever", {}))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await started.wait()
            tg.cancel_scope.cancel()
    assert saw_cancel == [True]
    assert results == []  # no result was made out of the cancellation


@pytest.mark.anyio
async def test_an_unserialisable_return_value_is_a_clear_error() -> None:
    def give_lock() -> Any:
        return threading.Lock()

    tm = ToolManager()
    tm.register_tool(give_lock)
    result = await tm.run_tool("give_lock", {})
    assert result.error is not None
    assert result.error.code == "unserializable_result"
    assert "lock" in result.error.message.lower()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ""),
        ("plain", "plain"),
        ({"a": 1}, {"a": 1}),
        ([1, 2], [1, 2]),
        (3, 3),
        (True, True),
        (Point(x=1, y=2), {"x": 1, "y": 2}),
        (Model(name="n", when=datetime.date(2026, 1, 2)), {"name": "n", "when": "2026-01-02"}),
        (pathlib.PurePosixPath("/tmp/x"), "/tmp/x"),
        (datetime.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
        (Colour.RED, "red"),
        ((1, 2), [1, 2]),
        ({"blob": b"\x00\xff"}, {"blob": "AP8="}),
    ],
)
async def test_return_values_are_converted(value: Any, expected: Any) -> None:
    def give() -> Any:
        return value

    tm = ToolManager()
    tm.register_tool(give)
    result = await tm.run_tool("give", {})
    assert not result.is_error
    if isinstance(expected, str):
        assert result.text == expected
        assert result.structured is None
    else:
        assert result.structured == expected
        assert json.loads(result.text) == expected


@pytest.mark.anyio
async def test_png_bytes_become_an_image_block() -> None:
    def picture() -> bytes:
        return b"\x89PNG\r\n\x1a\n" + b"\x00" * 100

    tm = ToolManager()
    tm.register_tool(picture)
    result = await tm.run_tool("picture", {})
    assert isinstance(result.content[0], ImageContent)
    assert result.content[0].mime_type == "image/png"
    assert result.to_tool_message() == "[image: image/png, 108 B]"


@pytest.mark.anyio
async def test_a_handler_tool_gets_validated_arguments_and_the_call() -> None:
    seen: list[tuple[dict[str, Any], ToolCall]] = []

    class Recorder:
        async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
            seen.append((arguments, call))
            return ToolResult.from_text("ok")

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tm = ToolManager()
    tm.register_tool((ToolSpec(name="srv__count", input_schema=schema), Recorder()))
    context = SessionContext(user_id="u1")
    result = await tm.run_tool("srv__count", {"n": "4"}, context, tool_call_id="c1", timeout=9)
    assert result.text == "ok"
    arguments, call = seen[0]
    assert arguments == {"n": 4}
    assert (call.tool_name, call.tool_call_id, call.timeout) == ("srv__count", "c1", 9)
    assert call.session_context is context


@pytest.mark.anyio
async def test_a_default_session_context_is_used_when_none_is_given() -> None:
    contexts: list[SessionContext] = []

    def who(ctx: SessionContext) -> str:
        contexts.append(ctx)
        return "ok"

    tm = ToolManager()
    tm.register_tool(who)
    await tm.run_tool("who", {})
    assert isinstance(contexts[0], SessionContext)
    assert "ctx" not in json.dumps(tm.get_openai_tools())


@pytest.mark.anyio
async def test_a_bad_timeout_is_a_programming_error() -> None:
    tm = ToolManager()
    tm.register_tool(add)
    with pytest.raises(ValueError, match="timeout"):
        await tm.run_tool("add", {"a": 1}, timeout=0)


@pytest.mark.anyio
async def test_aclose_runs_owned_closers_in_reverse_and_then_calls_fail() -> None:
    order: list[str] = []
    tm = ToolManager()
    tm.register_tool(add)

    async def close_first() -> None:
        order.append("first")

    async def close_second() -> None:
        order.append("second")

    tm.push_async_callback(close_first)
    tm.push_async_callback(close_second)
    async with tm:
        pass
    assert order == ["second", "first"]
    assert tm.closed
    await tm.aclose()  # idempotent
    assert order == ["second", "first"]
    result = await tm.run_tool("add", {"a": 1})
    assert result.error is not None
    assert result.error.code == "manager_closed"
    with pytest.raises(ToolManagerClosedError):
        tm.register_tool(echo)


@pytest.mark.anyio
async def test_enter_async_context_is_exited_on_aclose() -> None:
    events: list[str] = []

    class Resource:
        async def __aenter__(self) -> str:
            events.append("enter")
            return "resource"

        async def __aexit__(self, *exc: object) -> None:
            events.append("exit")

    async with ToolManager() as tm:
        assert await tm.enter_async_context(Resource()) == "resource"
        assert events == ["enter"]
    assert events == ["enter", "exit"]


def test_collect_discovered_takes_each_decorated_tool_once() -> None:
    tm = ToolManager()
    added = tm.collect_discovered()
    assert "get_weather" in added
    assert tm.collect_discovered() == []


def test_the_manager_is_a_tool_provider() -> None:
    assert isinstance(ToolManager(), ToolProvider)


class SchemaExportError(SagentsError):
    """Stands for the export error of ``sagents.tool.openai_export`` (any SagentsError)."""


class _StaticHandler:
    def __init__(self, text: str) -> None:
        self._text = text

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult(content=(TextContent(text=self._text),))


def test_two_names_exported_alike_are_refused_at_registration() -> None:
    tm = ToolManager()
    tm.register_tool((ToolSpec(name="a.b"), _StaticHandler("x")))
    exported = tm.get_openai_tools()[0]["function"]["name"]
    with pytest.raises(ToolNameConflictError, match="exported"):
        tm.register_tool((ToolSpec(name=exported), _StaticHandler("y")))
    tm.unregister_tool("a.b")
    tm.register_tool((ToolSpec(name=exported), _StaticHandler("y")))  # free again
    assert tm.list_all_tools_name() == [exported]


def test_a_tool_that_cannot_be_exported_does_not_take_the_others_down(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fussy(spec: ToolSpec, *, strict: bool = False, name: str | None = None) -> Any:
        if spec.name == "broken" or (spec.name == "loose" and strict):
            raise SchemaExportError(f"cannot export {spec.name!r}")
        return to_openai_tool(spec, strict=strict, name=name)

    monkeypatch.setattr("sagents.tool.openai_export.to_openai_tool", fussy)
    tm = ToolManager()
    for name in ("broken", "fine", "loose"):
        tm.register_tool((ToolSpec(name=name), _StaticHandler(name)))
    with caplog.at_level(logging.WARNING, logger="sagents.tool.tool_manager"):
        faithful = tm.get_openai_tools()
        strict = tm.get_openai_tools(strict=True)
    assert [t["function"]["name"] for t in faithful] == ["fine", "loose"]
    assert [t["function"].get("strict", False) for t in strict] == [True, False]
    assert any("'broken'" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_strict_calls_turn_null_optional_arguments_into_defaults() -> None:
    def page(query: str, cursor: str | None = None, limit: int = 10) -> dict[str, Any]:
        return {"query": query, "cursor": cursor, "limit": limit}

    tm = ToolManager()
    tm.register_tool(page)
    strict_tool = tm.get_openai_tools(strict=True)[0]
    assert strict_tool["function"]["strict"] is True
    sent = {"query": "q", "cursor": None, "limit": None}  # what a strict-mode model sends
    result = await tm.run_tool("page", sent, strict=True)
    assert result.structured == {"query": "q", "cursor": None, "limit": 10}
    kept = await tm.run_tool("page", {"query": "q", "cursor": None})  # explicit null kept
    assert kept.structured == {"query": "q", "cursor": None, "limit": 10}


@pytest.mark.anyio
@pytest.mark.parametrize("args", [[1, 2], 7, "[1, 2]"])
async def test_arguments_that_are_not_an_object_give_a_clear_error(args: Any) -> None:
    tm = ToolManager()
    tm.register_tool(add)
    result = await tm.run_tool("add", args)
    assert result.error is not None
    assert result.error.code == "invalid_arguments"
    assert "a JSON object" in result.error.message


@pytest.mark.anyio
async def test_a_tool_whose_task_group_fails_reports_the_real_errors() -> None:
    async def fan_out() -> str:
        async def fail(message: str) -> None:
            raise KeyError(message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(fail, "first")
        return "never"

    tm = ToolManager()
    tm.register_tool(fan_out)
    result = await tm.run_tool("fan_out", {})
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "KeyError: 'first'" in result.error.message


@pytest.mark.anyio
async def test_call_contexts_wrap_each_call_and_exit_on_timeout() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def around(call: ToolCall) -> AsyncIterator[None]:
        events.append(f"enter {call.tool_name} {call.tool_call_id}")
        try:
            yield
        finally:
            events.append(f"exit {call.tool_name}")

    async def hang() -> str:
        await anyio.sleep_forever()
        return "never"

    tm = ToolManager()
    tm.register_tool(add)
    tm.register_tool(hang)
    tm.add_call_context(around)
    assert (await tm.run_tool("add", {"a": 1}, tool_call_id="c1")).structured == {"result": 2.0}
    with anyio.fail_after(10):
        timed_out = await tm.run_tool("hang", {}, tool_call_id="c2", timeout=0.05)
    assert timed_out.error is not None
    assert timed_out.error.code == "timeout"
    await tm.run_tool("add", {"a": "bad"})  # invalid: the tool never runs, no context either
    assert events == ["enter add c1", "exit add", "enter hang c2", "exit hang"]


def test_list_specs_gives_every_spec_sorted() -> None:
    tm = ToolManager()
    tm.register_tool(echo)
    tm.register_tool(add)
    assert [spec.name for spec in tm.list_specs()] == ["add", "echo"]
