"""Arguments a model should not be able to send (docs/tools.md)."""

from __future__ import annotations

import pytest

from sagents.errors import InvalidArgumentsError
from sagents.tool._arguments import ArgumentValidator, parse_arguments


@pytest.mark.parametrize("text", ['{"x": NaN}', '{"x": Infinity}', '{"x": [-Infinity]}'])
def test_nan_and_infinity_in_json_text_are_refused_as_not_json(text: str) -> None:
    with pytest.raises(InvalidArgumentsError, match="not valid JSON") as caught:
        parse_arguments("t", text)
    assert "is not a JSON value" in caught.value.message


def test_a_nan_inside_a_string_is_still_a_string() -> None:
    assert parse_arguments("t", '{"x": "NaN"}') == {"x": "NaN"}


@pytest.mark.parametrize("control", ["\n", "\t", "\r", "\x00", "\x1f"])
def test_a_raw_control_character_inside_a_string_is_kept(control: str) -> None:
    # llama-cpp-python's chatml-function-calling grammar lets a raw newline into a JSON
    # string (docs/agent.md, "Quirks handled"): the text is read as the model meant it
    text = '{"code": "print(1)' + control + 'print(2)", "description": "two lines"}'
    assert parse_arguments("t", text) == {
        "code": "print(1)" + control + "print(2)",
        "description": "two lines",
    }


def test_a_control_character_in_a_string_the_schema_wants_as_an_object_is_kept() -> None:
    validator = ArgumentValidator({"type": "object", "properties": {"options": {"type": "object"}}})
    arguments = parse_arguments("t", '{"options": "{\\"note\\": \\"a\\nb\\"}"}')
    assert arguments == {"options": '{"note": "a\nb"}'}  # the JSON escape became a raw newline
    assert validator.validate("t", arguments) == {"options": {"note": "a\nb"}}


@pytest.mark.parametrize(
    "text",
    [
        '{"code": "print(1)"\n\x00}',  # a control character outside a string
        '{"code": "unterminated\n}',
        '{"code": "print(1)",}',
        "{code: 1}",
    ],
)
def test_json_that_is_broken_otherwise_is_still_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentsError, match="not valid JSON") as caught:
        parse_arguments("t", text)
    assert caught.value.hint == "Send the arguments as one JSON object."
