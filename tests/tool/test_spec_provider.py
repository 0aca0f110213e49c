"""``SpecProvider``: a provider from ``list_specs`` and ``call`` is a whole ``ToolProvider``,
named and exported the way ``ToolManager`` names and exports the same tools; one written before
the call seam (``run_tool`` overridden instead) still works."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import UnknownToolError
from sagents.tool import (
    SessionContext,
    SpecProvider,
    ToolManager,
    ToolProvider,
    ToolProxy,
    ToolRequest,
)
from sagents.tool.tool_base import tool


@tool(name="fleet.status", description="A device's status.", permission="read_only")
async def status(sn: str, verbose: bool = False) -> dict[str, str]:
    return {"sn": sn}


class Wrapper(SpecProvider):
    """Serves a manager's tools through the two methods only."""

    def __init__(self, manager: ToolManager) -> None:
        self.manager = manager

    def list_specs(self) -> list[ToolSpec]:
        return self.manager.list_specs()

    async def call(self, request: ToolRequest) -> ToolResult:
        return await self.manager.call(request)


class LegacyWrapper(SpecProvider):
    """Overrides ``run_tool``, as a wrapper written before the call seam did."""

    def __init__(self, manager: ToolManager) -> None:
        self.manager = manager

    def list_specs(self) -> list[ToolSpec]:
        return self.manager.list_specs()

    async def run_tool(
        self,
        name: str,
        args: Mapping[str, Any] | str | None = None,
        session_context: SessionContext | None = None,
        *,
        tool_call_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API's per-call timeout
        strict: bool = False,
    ) -> ToolResult:
        return await self.manager.run_tool(name, args, session_context, strict=strict)


def _manager() -> ToolManager:
    manager = ToolManager()
    manager.register_tool(status)
    return manager


@pytest.mark.parametrize("strict", [False, True])
def test_a_spec_provider_exports_what_the_manager_exports(strict: bool) -> None:
    manager = _manager()
    wrapper = Wrapper(manager)
    assert isinstance(wrapper, ToolProvider)
    assert wrapper.get_openai_tools(strict=strict) == manager.get_openai_tools(strict=strict)
    assert wrapper.get_responses_tools(strict=strict) == manager.get_responses_tools(strict=strict)
    assert wrapper.get_anthropic_tools(strict=strict) == manager.get_anthropic_tools(strict=strict)
    assert wrapper.get_gemini_tools(strict=strict) == manager.get_gemini_tools(strict=strict)


def test_a_spec_provider_resolves_exported_names_and_refuses_unknown_ones() -> None:
    wrapper = Wrapper(_manager())
    exported = wrapper.get_openai_tools()[0]["function"]["name"]
    assert exported != "fleet.status"
    assert wrapper.has_tool(exported)
    assert wrapper.resolve_exported_name(exported) == "fleet.status"
    assert wrapper.get_tool_spec(exported).name == "fleet.status"
    assert wrapper.list_all_tools_name() == ["fleet.status"]
    assert not wrapper.has_tool("nothing")
    with pytest.raises(UnknownToolError):
        wrapper.get_tool_spec("nothing")


@pytest.mark.anyio
async def test_a_tool_proxy_over_a_spec_provider_calls_through_it_by_exported_name() -> None:
    wrapper = Wrapper(_manager())
    proxy = ToolProxy(wrapper)
    exported = proxy.get_openai_tools()[0]["function"]["name"]
    result = await proxy.run_tool(exported, {"sn": "A1"})
    assert result.structured == {"sn": "A1"}


@pytest.mark.anyio
async def test_a_wrapper_written_before_the_call_seam_is_called_through_its_run_tool() -> None:
    wrapper = LegacyWrapper(_manager())
    proxy = ToolProxy(wrapper)
    result = await proxy.call(ToolRequest(name="fleet.status", arguments={"sn": "B2"}))
    assert result.structured == {"sn": "B2"}


class Nothing(SpecProvider):
    def list_specs(self) -> list[ToolSpec]:
        return []


@pytest.mark.anyio
async def test_a_spec_provider_that_runs_nothing_says_which_method_to_write() -> None:
    with pytest.raises(NotImplementedError, match=r"Nothing must override call\(request\)"):
        await Nothing().run_tool("x")
