"""Tool-use examples (docs/tools.md, "Examples"): ``@tool(examples=...)`` and an upstream's
``_meta``, exported as Anthropic's ``input_examples`` and in the other providers' descriptions,
and listed again in the gateway's ``_meta``."""

from __future__ import annotations

import json
import logging

import pytest
from mcp.server.mcpserver import MCPServer

from sagents.errors import ToolDefinitionError
from sagents.gateway._convert import spec_to_mcp_tool
from sagents.mcp import ServerSettings
from sagents.tool import ToolManager
from sagents.tool._examples import EXAMPLES_META_KEY
from sagents.tool.tool_base import get_local_tool, tool

pytestmark = pytest.mark.anyio


@tool(examples=[{"city": "Lisbon"}, {"city": "Oslo", "days": 3}])
def forecast(city: str, days: int = 1) -> str:
    """The weather forecast of a city."""
    return city


def test_tool_examples_are_anthropic_input_examples_and_in_the_other_descriptions() -> None:
    manager = ToolManager()
    manager.register_tool(forecast)
    examples = [{"city": "Lisbon"}, {"city": "Oslo", "days": 3}]
    (anthropic,) = manager.get_anthropic_tools()
    assert anthropic["input_examples"] == examples
    assert anthropic["description"] == "The weather forecast of a city."
    (strict,) = manager.get_anthropic_tools(strict=True)
    assert strict["input_examples"] == examples
    expected = "The weather forecast of a city.\n\nExamples of arguments:\n" + "\n".join(
        json.dumps(e, sort_keys=True) for e in examples
    )
    assert manager.get_openai_tools()[0]["function"]["description"] == expected
    assert manager.get_responses_tools()[0]["description"] == expected
    assert manager.get_gemini_tools()[0]["description"] == expected


def test_a_tool_without_examples_exports_as_before() -> None:
    @tool
    def plain(city: str) -> str:
        """Plain."""
        return city

    manager = ToolManager()
    manager.register_tool(plain)
    assert "input_examples" not in manager.get_anthropic_tools()[0]
    assert manager.get_openai_tools()[0]["function"]["description"] == "Plain."


def _spec_of(func: object) -> object:
    local = get_local_tool(func)
    assert local is not None
    return local.spec


def test_the_gateway_lists_the_examples_in_the_tools_meta() -> None:
    local = get_local_tool(forecast)
    assert local is not None
    spec = local.spec
    listed = spec_to_mcp_tool(spec)
    assert listed.meta == {EXAMPLES_META_KEY: [{"city": "Lisbon"}, {"city": "Oslo", "days": 3}]}


def test_examples_that_are_not_a_list_of_dicts_are_refused_at_decoration() -> None:
    with pytest.raises(ToolDefinitionError, match="example 0 must be a dict"):

        @tool(examples=["Lisbon"])  # type: ignore[list-item]  # what the test is about
        def bad(city: str) -> str:
            return city

    with pytest.raises(ToolDefinitionError, match="must be a list of arguments dicts"):

        @tool(examples={"city": "Lisbon"})  # type: ignore[call-overload, untyped-decorator]  # the test
        def worse(city: str) -> str:
            return city


def test_an_example_the_schema_refuses_is_a_definition_error_naming_it() -> None:
    @tool(examples=[{"city": "Lisbon"}, {"days": "three"}])
    def wrong(city: str, days: int = 1) -> str:
        return city

    with pytest.raises(ToolDefinitionError, match="example 1 does not match the input schema"):
        _spec_of(wrong)


async def test_an_upstreams_examples_are_read_from_its_meta_and_invalid_ones_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = MCPServer("upstream")

    @server.tool(meta={EXAMPLES_META_KEY: [{"sn": "SN0001"}, {"sn": 7}, "junk"], "other": 1})
    def get_device(sn: str) -> str:
        """One device."""
        return sn

    async with ToolManager() as manager:
        await manager.register_mcp_server("fleet", server, ServerSettings())
        with caplog.at_level(logging.WARNING, logger="sagents.tool._examples"):
            (anthropic,) = manager.get_anthropic_tools()
        assert anthropic["input_examples"] == [{"sn": "SN0001"}]
        assert "example 1 does not match the input schema" in caplog.text
        assert "example 2 is not an object" in caplog.text
        description = manager.get_openai_tools()[0]["function"]["description"]
        assert description == 'One device.\n\nExamples of arguments:\n{"sn": "SN0001"}'
