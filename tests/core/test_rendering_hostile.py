"""Rendering of huge error messages (docs/tools.md: truncation keeps the error flag)."""

from __future__ import annotations

import json
from typing import Any

from sagents.core._result import ToolResult
from sagents.core._tokens import default_token_counter


def test_a_huge_error_message_alone_uses_the_whole_budget_and_names_the_real_limit() -> None:
    counter = default_token_counter()
    result = ToolResult.from_error("execution_error", "boom " * 20_000)
    message = result.to_tool_message(max_tokens=400)
    assert message.startswith("Error [execution_error]: boom")
    assert "400-token limit" in message
    assert not counter.exceeds(message, 400)
    assert counter.count(message) > 300  # not cut down to a quarter of the budget


def test_an_error_line_beside_a_body_is_cut_to_its_share_but_names_the_real_limit() -> None:
    result = ToolResult.from_text("x " * 20_000, is_error=True)
    error = ToolResult.from_error("execution_error", "boom " * 20_000)
    both = ToolResult(content=result.content, is_error=True, error=error.error)
    message = both.to_tool_message(max_tokens=400)
    assert message.startswith("Error [execution_error]: boom")
    assert "400-token limit" in message
    assert "100-token limit" not in message


def test_a_very_deep_structured_result_over_budget_renders_as_valid_json() -> None:
    value: dict[str, Any] = {"pad": "y" * 100_000}
    inner = value
    for _ in range(900):  # close to Python's recursion limit, as a remote server may send
        inner["x"] = {"pad": "z"}
        inner = inner["x"]
    message = ToolResult.from_structured(value).to_tool_message(max_tokens=500)
    assert isinstance(json.loads(message), dict)
    assert "left out" in message
