"""Defining and calling a local tool imports no MCP, model, HTTP or gateway code.

Each check runs in a fresh interpreter (``sys.modules`` of the test process already holds
everything) and lists the heavy packages that the snippet imported.
"""

from __future__ import annotations

import pytest

from tests.fresh_imports import imported_modules

# Top-level packages (and sagents subpackages) a local tool never needs.
HEAVY = ("mcp", "mcp_types", "openai", "starlette", "uvicorn", "httpx", "httpx2")
HEAVY_SAGENTS = ("sagents.mcp", "sagents.gateway", "sagents.script", "sagents.sandbox")


def _imported_heavy(snippet: str, *, also: tuple[str, ...] = ()) -> list[str]:
    """Run ``snippet`` in a new interpreter; the heavy modules it left in ``sys.modules``.

    Args:
        snippet: The program.
        also: More top-level packages that count as heavy.
    """
    return imported_modules(snippet, HEAVY + also + HEAVY_SAGENTS)


def test_importing_tool_base_does_not_import_mcp() -> None:
    snippet = "from sagents.tool.tool_base import tool\n"
    assert _imported_heavy(snippet, also=("jsonschema",)) == []


def test_a_valid_local_call_does_not_import_the_jsonschema_package() -> None:
    # Valid arguments pass the compiled check; ``jsonschema`` only reports refusals.
    snippet = """
    import anyio
    from sagents.tool import ToolManager

    async def add(a: int, b: int = 1) -> int:
        return a + b

    async def main() -> None:
        tm = ToolManager()
        tm.register_tool(add)
        assert (await tm.run_tool("add", {"a": 1})).structured == {"result": 2}

    anyio.run(main)
    """
    assert _imported_heavy(snippet, also=("jsonschema",)) == []


def test_defining_and_calling_a_local_tool_does_not_import_mcp() -> None:
    snippet = """
    import anyio
    from sagents.tool import ToolManager, ToolProxy, emit_tool_progress
    from sagents.tool.tool_base import tool
    from sagents.tool.tool_schema import ToolSpec

    @tool
    async def add(a: int, b: int = 1) -> int:
        '''Add two numbers.'''
        await emit_tool_progress("adding\\n")
        return a + b

    async def main() -> None:
        async with ToolManager() as tm:
            tm.register_tool(add)
            tm.get_openai_tools(strict=True)
            result = await tm.run_tool("add", '{"a": "2"}')
            assert result.structured == {"result": 3}, result
            bad = await tm.run_tool("add", {"a": "x"})
            assert bad.error is not None and bad.error.code == "invalid_arguments", bad
            proxied = await ToolProxy([tm], available_tools=["add"]).run_tool("add", {"a": 1})
            assert not proxied.is_error, proxied

    anyio.run(main)
    """
    assert _imported_heavy(snippet) == []


def test_remote_parameter_classes_still_import_from_tool_schema() -> None:
    from sagents.mcp._params import SseServerParameters, StreamableHttpServerParameters
    from sagents.tool import tool_schema

    assert tool_schema.SseServerParameters is SseServerParameters
    assert tool_schema.StreamableHttpServerParameters is StreamableHttpServerParameters


def test_tool_schema_names_a_missing_attribute() -> None:
    from sagents.tool import tool_schema

    with pytest.raises(AttributeError, match="NoSuchName"):
        getattr(tool_schema, "NoSuchName")  # noqa: B009 - a name mypy must not check
