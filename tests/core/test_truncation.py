"""Truncation to MAX_TOOL_RESULT_TOKENS, keeping text and JSON well-formed."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagents.core._tokens import EstimateCounter, default_token_counter
from sagents.core._truncation import (
    ENV_MAX_TOOL_RESULT_TOKENS,
    MAX_TOOL_RESULT_TOKENS,
    max_tool_result_tokens,
    truncate_json,
    truncate_text,
)


def test_the_default_budget_is_12000_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MAX_TOOL_RESULT_TOKENS, raising=False)
    assert max_tool_result_tokens() == MAX_TOOL_RESULT_TOKENS == 12000


def test_the_environment_is_read_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_MAX_TOOL_RESULT_TOKENS, "500")
    assert max_tool_result_tokens() == 500
    monkeypatch.setenv(ENV_MAX_TOOL_RESULT_TOKENS, "700")
    assert max_tool_result_tokens() == 700


@pytest.mark.parametrize("raw", ["lots", "-5", "0", "1.5"])
def test_an_invalid_budget_warns_and_uses_the_default(
    raw: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_MAX_TOOL_RESULT_TOKENS, raw)
    with caplog.at_level(logging.WARNING, logger="sagents.core._truncation"):
        assert max_tool_result_tokens() == MAX_TOOL_RESULT_TOKENS
    assert any(ENV_MAX_TOOL_RESULT_TOKENS in r.getMessage() for r in caplog.records)


def test_text_that_fits_is_untouched() -> None:
    assert truncate_text("hello", 10) == "hello"


def test_long_text_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    lines = [f"line {i}: {'word ' * 10}" for i in range(2000)]
    text = "\n".join(lines)
    result = truncate_text(text, 300)
    counter = default_token_counter()
    assert counter.count(result) <= 300
    assert result.startswith("line 0:")
    assert result.endswith(lines[-1])  # the tail (where a continuation cursor lives) survives
    assert "characters cut here" in result
    head, _, rest = result.partition("\n[... ")
    marker, _, tail = rest.partition(" ...]\n")
    omitted = int(marker.split(" of ")[0].replace(",", ""))
    assert omitted == len(text) - len(head) - len(tail)
    assert head.endswith("\n")  # the cut moved to a line break


def test_chinese_text_is_never_cut_inside_a_character() -> None:
    text = "人工智能是计算机科学的一个分支。" * 3000
    result = truncate_text(text, 200)
    assert "\ufffd" not in result
    head, _, rest = result.partition("\n[... ")
    tail = rest.split("]\n", 1)[1]
    assert text.startswith(head)
    assert text.endswith(tail)


@pytest.mark.parametrize(
    "counter", [default_token_counter(), EstimateCounter()], ids=["tiktoken", "estimate"]
)
def test_json_is_shrunk_structurally_and_stays_valid(
    counter: Any,
) -> None:
    document = {
        "items": [{"id": i, "name": f"device-{i}", "log": "x" * 300} for i in range(3000)],
        "cursor": "next-page-token-42",
        "description": "long " * 5000,
    }
    text = truncate_json(document, 1000, counter=counter)
    assert counter.count(text) <= 1000
    parsed = json.loads(text)
    assert parsed["cursor"] == "next-page-token-42"
    assert any("more items" in str(item) for item in parsed["items"])
    assert parsed["items"][0]["id"] == 0
    assert parsed["items"][-1]["id"] == 2999  # the last items survive too
    assert "more characters" in parsed["description"]


def test_json_with_many_keys_says_how_many_were_left_out() -> None:
    document = {f"key{i}": i for i in range(20000)}
    parsed = json.loads(truncate_json(document, 200))
    assert "more keys left out" in parsed["..."]


def test_deep_json_falls_back_to_a_valid_summary() -> None:
    document: Any = "leaf"
    for _ in range(400):
        document = [document, "padding " * 3]
    text = truncate_json(document, 50)
    json.loads(text)
    assert default_token_counter().count(text) <= 50


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=200),
    lambda children: (
        st.lists(children, max_size=30)
        | st.dictionaries(st.text(max_size=10), children, max_size=30)
    ),
    max_leaves=300,
)


@settings(max_examples=25)
@given(json_values, st.integers(min_value=40, max_value=400))
def test_truncated_json_always_parses_and_fits(value: Any, budget: int) -> None:
    text = truncate_json(value, budget)
    json.loads(text)
    assert default_token_counter().count(text) <= budget


@settings(max_examples=25)
@given(st.text(min_size=0, max_size=3000), st.integers(min_value=60, max_value=300))
def test_truncated_text_is_made_of_exact_pieces_of_the_original(text: str, budget: int) -> None:
    result = truncate_text(text, budget)
    if result == text:
        return
    assert default_token_counter().count(result) <= budget
    head, _, rest = result.partition("\n[... ")
    tail = rest.split("]\n", 1)[1]
    assert text.startswith(head)
    assert text.endswith(tail)
