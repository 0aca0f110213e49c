import pytest

from sagents.core._result import ErrorInfo, TextContent, ToolResult
from sagents.errors import InvalidArgumentsError


def test_error_result_is_an_error_and_states_code_and_hint() -> None:
    result = ToolResult.from_error("unknown_tool", "no tool 'x'", hint="call list_tools")
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "unknown_tool"
    assert "unknown_tool" in result.text
    assert "call list_tools" in result.text


def test_error_info_round_trips_to_the_typed_exception() -> None:
    error = InvalidArgumentsError("bad", hint="h", details={"problems": ["x"]})
    rebuilt = ErrorInfo.from_exception(error).to_exception()
    assert isinstance(rebuilt, InvalidArgumentsError)
    assert rebuilt.details == {"problems": ["x"]}


def test_structured_result_carries_its_json_text() -> None:
    result = ToolResult.from_structured({"temp_c": 23, "city": "北京"})
    assert result.structured == {"temp_c": 23, "city": "北京"}
    assert result.content == (TextContent(text='{"temp_c":23,"city":"北京"}'),)


def test_with_content_is_deprecated_and_still_copies() -> None:
    result = ToolResult.from_text("a", is_error=True)
    with pytest.warns(DeprecationWarning, match="dataclasses.replace"):
        copied = result.with_content([TextContent(text="b")])
    assert (copied.text, copied.is_error) == ("b", True)
