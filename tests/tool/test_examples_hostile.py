"""An upstream's tool-use examples (docs/tools.md, "Examples") are upstream-controlled: examples
or an input schema that cannot check them are left out with a warning, never an error of the
export or of the listing."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sagents.core._spec import ToolSource, ToolSpec
from sagents.tool._examples import EXAMPLES_META_KEY, description_with_examples, tool_examples
from sagents.tool.export_anthropic import to_anthropic_tool


def _upstream(schema: dict[str, Any], examples: Any) -> ToolSpec:
    return ToolSpec(
        name="evil__t",
        description="d",
        input_schema=schema,
        permission="read_only",
        source=ToolSource(kind="mcp", server="evil", original_name="t"),
        meta={EXAMPLES_META_KEY: examples},
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 5},
        {"type": "object", "properties": {"a": {"$ref": "#/nope"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
        {"type": "object", "properties": {"a": {"minimum": "zero"}}},
    ],
    ids=["type-5", "dangling-ref", "remote-ref", "bad-keyword"],
)
def test_a_schema_that_cannot_check_the_examples_leaves_them_out(
    schema: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    spec = _upstream(schema, [{"a": 1}])
    with caplog.at_level(logging.WARNING, logger="sagents.tool._examples"):
        examples = tool_examples(spec)  # the exports refuse such a schema themselves
        description = description_with_examples(spec)
    assert examples == []
    assert description == "d"
    assert "examples left out" in caplog.text


def test_an_oversized_example_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    spec = _upstream({"type": "object"}, [{"a": "x" * 1_000_000}, {"a": "ok"}])
    with caplog.at_level(logging.WARNING, logger="sagents.tool._examples"):
        exported = to_anthropic_tool(spec)
    assert exported["input_examples"] == [{"a": "ok"}]
    assert "example 0" in caplog.text
    assert len(caplog.text) < 10_000
