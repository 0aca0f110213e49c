"""ToolResult.to_tool_message(): what the model receives (docs/tools.md)."""

from __future__ import annotations

import base64
import json

import pytest

from sagents.core._rendering import TOOL_ERROR_PREFIX, format_size, render_tool_message
from sagents.core._result import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from sagents.core._tokens import default_token_counter
from sagents.core._truncation import ENV_MAX_TOOL_RESULT_TOKENS

PNG = base64.b64encode(b"\x89PNG" + b"\x00" * 12_296).decode()


def test_text_blocks_are_rendered_verbatim_and_joined() -> None:
    result = ToolResult(content=(TextContent(text="  one \n"), TextContent(text='{"a": 1}')))
    assert result.to_tool_message() == '  one \n\n{"a": 1}'


def test_a_structured_only_result_is_rendered_as_json() -> None:
    result = ToolResult(structured={"city": "北京", "temp": 23})
    assert json.loads(result.to_tool_message()) == {"city": "北京", "temp": 23}
    assert "北京" in result.to_tool_message()


def test_media_become_short_placeholders_never_base64() -> None:
    result = ToolResult(
        content=(
            TextContent(text="here:"),
            ImageContent(data=PNG, mime_type="image/png"),
            AudioContent(
                data=base64.b64encode(b"\x00" * 1_200_000).decode(), mime_type="audio/wav"
            ),
            ResourceLink(uri="file:///r.txt", name="r.txt", mime_type="text/plain", size=2048),
            EmbeddedResource(uri="mem://blob", mime_type="application/pdf", blob=PNG),
            EmbeddedResource(uri="mem://note", text="note body"),
        )
    )
    message = result.to_tool_message()
    assert PNG[:40] not in message
    assert message.splitlines() == [
        "here:",
        "[image: image/png, 12.3 KB]",
        "[audio: audio/wav, 1.2 MB]",
        "[resource link: r.txt <file:///r.txt>, text/plain, 2.0 KB]",
        "[resource: mem://blob, application/pdf, 12.3 KB]",
        "[resource: mem://note]",
        "note body",
    ]


def test_a_layer_error_states_its_code_once() -> None:
    result = ToolResult.from_error("timeout", "tool 'x' did not finish", hint="try again")
    message = result.to_tool_message()
    assert message == "Error [timeout]: tool 'x' did not finish\nHint: try again"


def test_an_error_the_tool_reported_is_marked_as_an_error() -> None:
    result = ToolResult(content=(TextContent(text="file not found"),), is_error=True)
    assert result.to_tool_message() == f"{TOOL_ERROR_PREFIX}\nfile not found"


def test_the_error_line_survives_truncation() -> None:
    big = "\n".join(f"trace line {i}" for i in range(20000))
    result = ToolResult(content=(TextContent(text=big),), is_error=True)
    message = result.to_tool_message(max_tokens=200)
    assert message.startswith(TOOL_ERROR_PREFIX)
    assert "characters cut here" in message
    assert default_token_counter().count(message) <= 200


def test_a_long_error_message_is_cut_but_keeps_its_code() -> None:
    result = ToolResult.from_error("execution_error", "boom " * 20000)
    message = result.to_tool_message(max_tokens=300)
    assert message.startswith("Error [execution_error]: boom")
    assert default_token_counter().count(message) <= 300


def test_a_large_structured_result_stays_valid_json() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(10000)]
    for result in (ToolResult(structured=rows), ToolResult.from_structured(rows)):
        message = result.to_tool_message(max_tokens=500)
        parsed = json.loads(message)
        assert parsed[0] == {"id": 0, "name": "row 0"}
        assert parsed[-1] == {"id": 9999, "name": "row 9999"}
        assert default_token_counter().count(message) <= 500


def test_a_json_text_that_fits_is_left_exactly_as_it_was() -> None:
    text = '{ "a" : [1, 2, 3] }'
    assert ToolResult.from_text(text).to_tool_message(max_tokens=100) == text


def test_the_budget_comes_from_the_environment_on_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = ToolResult.from_text("word " * 5000)
    monkeypatch.setenv(ENV_MAX_TOOL_RESULT_TOKENS, "100")
    short = result.to_tool_message()
    monkeypatch.setenv(ENV_MAX_TOOL_RESULT_TOKENS, "1000")
    longer = result.to_tool_message()
    counter = default_token_counter()
    assert counter.count(short) <= 100 < counter.count(longer) <= 1000


def test_an_empty_result_renders_as_empty_text() -> None:
    assert ToolResult().to_tool_message() == ""


def test_a_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        ToolResult.from_text("x").to_tool_message(max_tokens=0)


@pytest.mark.parametrize(
    ("size", "text"), [(0, "0 B"), (999, "999 B"), (12_300, "12.3 KB"), (3_400_000_000, "3.4 GB")]
)
def test_sizes_are_formatted_for_people(size: int, text: str) -> None:
    assert format_size(size) == text


class _CountingCounter:
    """The default counter, recording whether it was asked anything."""

    def __init__(self) -> None:
        self.inner = default_token_counter()
        self.asked = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def count(self, text: str) -> int:
        self.asked += 1
        return self.inner.count(text)

    def exceeds(self, text: str, limit: int) -> bool:
        self.asked += 1
        return self.inner.exceeds(text, limit)

    def head(self, text: str, tokens: int) -> str:
        self.asked += 1
        return self.inner.head(text, tokens)

    def tail(self, text: str, tokens: int) -> str:
        self.asked += 1
        return self.inner.tail(text, tokens)


def test_a_result_of_fewer_bytes_than_the_budget_is_rendered_without_counting() -> None:
    # a token is at least one byte: such a result fits, so the tiktoken encoding (tens of MB
    # once loaded) is never needed for it; one byte over and the counter decides
    counter = _CountingCounter()
    small = ToolResult(content=(TextContent(text="x" * 99),))
    assert render_tool_message(small, max_tokens=100, counter=counter) == "x" * 99
    assert counter.asked == 0
    error = ToolResult.from_error("bad_input", "no")
    rendered = render_tool_message(error, max_tokens=100, counter=counter)
    assert rendered.startswith("Error [bad_input]")
    assert counter.asked == 0
    big = ToolResult(content=(TextContent(text="word " * 40),))
    assert render_tool_message(big, max_tokens=100, counter=counter) == "word " * 40
    assert counter.asked > 0


def test_a_long_error_line_with_a_body_still_gets_only_its_share() -> None:
    # the whole fits in the budget's bytes, but the error line is over its quarter of the
    # budget (about 30 tokens against 25): it is cut as before, the body kept
    error = ToolResult.from_error("e", "x " * 30)
    assert error.error is not None
    result = ToolResult(
        content=(*error.content, TextContent(text="detail")), is_error=True, error=error.error
    )
    rendered = render_tool_message(result, max_tokens=100)
    assert len(f"{error.error.message}detail") < 100
    assert "x " * 30 not in rendered
    assert rendered.endswith("detail")
