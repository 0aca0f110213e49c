"""Arguments a model should not be able to send (docs/tools.md)."""

from __future__ import annotations

import pytest

from sagents.errors import InvalidArgumentsError
from sagents.tool._arguments import parse_arguments


@pytest.mark.parametrize("text", ['{"x": NaN}', '{"x": Infinity}', '{"x": [-Infinity]}'])
def test_nan_and_infinity_in_json_text_are_refused_as_not_json(text: str) -> None:
    with pytest.raises(InvalidArgumentsError, match="not valid JSON") as caught:
        parse_arguments("t", text)
    assert "is not a JSON value" in caught.value.message


def test_a_nan_inside_a_string_is_still_a_string() -> None:
    assert parse_arguments("t", '{"x": "NaN"}') == {"x": "NaN"}
