"""ToolProxy: priority, whitelist, and the same interface as ToolManager (docs/tools.md)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import NotAllowedError, UnknownToolError
from sagents.tool import ToolManager, ToolProvider, ToolProxy
from sagents.tool._handler import ToolCall


class _Answer:
    def __init__(self, text: str) -> None:
        self.text = text

    async def __call__(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        return ToolResult.from_text(self.text)


def _manager(*names: str, label: str) -> ToolManager:
    tm = ToolManager()
    for name in names:
        tm.register_tool((ToolSpec(name=name, description=label), _Answer(f"{label}:{name}")))
    return tm


@pytest.fixture
def managers() -> tuple[ToolManager, ToolManager]:
    return _manager("search", "read", label="first"), _manager("search", "write", label="second")


@pytest.mark.anyio
async def test_the_first_manager_wins_a_name_both_hold(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers))
    assert (await proxy.run_tool("search", {})).text == "first:search"
    assert proxy.get_tool_spec("search").description == "first"
    assert (await proxy.run_tool("write", {})).text == "second:write"


def test_without_a_whitelist_every_tool_is_visible(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers))
    assert proxy.list_all_tools_name() == ["read", "search", "write"]
    names = [t["function"]["name"] for t in proxy.get_openai_tools()]
    assert names == ["read", "search", "write"]
    assert proxy.available_tools is None


@pytest.mark.anyio
async def test_a_call_outside_the_whitelist_is_not_allowed(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers), available_tools=["read"])
    assert proxy.list_all_tools_name() == ["read"]
    assert [t["function"]["name"] for t in proxy.get_openai_tools()] == ["read"]
    result = await proxy.run_tool("write", {})
    assert result.error is not None
    assert result.error.code == "not_allowed"
    with pytest.raises(NotAllowedError):
        proxy.get_tool_spec("write")


@pytest.mark.anyio
async def test_an_unknown_tool_is_an_unknown_tool_result(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers))
    result = await proxy.run_tool("delete_everything", {})
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    with pytest.raises(UnknownToolError):
        proxy.get_tool_spec("delete_everything")


def test_unknown_names_in_the_whitelist_are_warned_about_and_ignored(
    managers: tuple[ToolManager, ToolManager], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sagents.tool._tool_proxy"):
        proxy = ToolProxy(list(managers), available_tools=["read", "nonexistent"])
    assert proxy.available_tools == frozenset({"read"})
    assert any("'nonexistent'" in r.getMessage() for r in caplog.records)


def test_allow_widens_within_what_the_managers_hold(
    managers: tuple[ToolManager, ToolManager], caplog: pytest.LogCaptureFixture
) -> None:
    proxy = ToolProxy(list(managers), available_tools=["read"])
    with caplog.at_level(logging.WARNING, logger="sagents.tool._tool_proxy"):
        added = proxy.allow(["write", "ghost"])
    assert added == ["write"]
    assert proxy.list_all_tools_name() == ["read", "write"]
    assert any("'ghost'" in r.getMessage() for r in caplog.records)


def test_restrict_narrows_and_cannot_widen(managers: tuple[ToolManager, ToolManager]) -> None:
    proxy = ToolProxy(list(managers), available_tools=["read", "search"])
    assert proxy.restrict(["search", "write"]) == ["search"]
    assert proxy.list_all_tools_name() == ["search"]


def test_the_whitelist_does_not_change_when_managers_gain_tools(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers), available_tools=["read"])
    managers[0].register_tool((ToolSpec(name="new_tool"), _Answer("x")))
    assert proxy.list_all_tools_name() == ["read"]


@pytest.mark.anyio
async def test_exported_names_reach_the_right_tool() -> None:
    tm = _manager("fleet/get.status", label="one")
    proxy = ToolProxy(tm)
    exported = proxy.get_openai_tools()[0]["function"]["name"]
    assert exported != "fleet/get.status"
    assert proxy.resolve_exported_name(exported) == "fleet/get.status"
    assert (await proxy.run_tool(exported, {})).text == "one:fleet/get.status"


@pytest.mark.anyio
async def test_arguments_are_still_validated_behind_the_proxy() -> None:
    tm = ToolManager()

    def double(n: int) -> int:
        return n * 2

    tm.register_tool(double)
    proxy = ToolProxy([tm])
    assert (await proxy.run_tool("double", {"n": "21"})).structured == {"result": 42}
    bad = await proxy.run_tool("double", {"n": "many"})
    assert bad.error is not None
    assert bad.error.code == "invalid_arguments"


def test_a_proxy_is_a_tool_provider_and_can_wrap_another_proxy(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    inner = ToolProxy(list(managers), available_tools=["read", "write"])
    outer = ToolProxy(inner, available_tools=["write"])
    assert isinstance(outer, ToolProvider)
    assert outer.list_all_tools_name() == ["write"]
    assert not outer.has_tool("search")


def test_list_specs_shows_only_visible_tools_with_priority(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers), available_tools=["search", "write"])
    specs = proxy.list_specs()
    assert [(s.name, s.description) for s in specs] == [("search", "first"), ("write", "second")]


def test_restricting_to_unknown_names_leaves_nothing_visible(
    managers: tuple[ToolManager, ToolManager],
) -> None:
    proxy = ToolProxy(list(managers))
    assert proxy.restrict(["Bash(git:*)"]) == []
    assert proxy.list_all_tools_name() == []
    assert proxy.get_openai_tools() == []
