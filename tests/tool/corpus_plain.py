"""Signature corpus, part 2: a module without postponed annotations (``typing`` generics,
string forward references, async functions)."""

from typing import Dict, List, Optional, Union  # noqa: UP035 - the old spellings are the case

from pydantic import BaseModel

from tests.tool.corpus_types import Case


def typing_generics(
    a: List[int],  # noqa: UP006
    b: Optional[Dict[str, str]] = None,  # noqa: UP006, UP045
    c: Union[int, float] = 0,  # noqa: UP007
) -> None:
    """Old-style typing generics."""


async def async_tool(x: int) -> str:
    """An async function; str output means no output schema."""
    return str(x)


def string_forward_ref(point: "LaterPoint") -> "LaterPoint":
    """A string annotation naming a class defined later in the module."""
    return point


class LaterPoint(BaseModel):
    """Defined after its first use."""

    x: int
    y: int = 0


CASES: list[Case] = [
    Case(
        typing_generics,
        valid=[{"a": [1]}, {"a": [], "b": {"k": "v"}, "c": 1.5}, {"a": [], "b": None}],
        invalid=[{"a": ["x"]}, {"a": [], "b": {"k": 1}}],
    ),
    Case(async_tool, valid=[{"x": 1}], invalid=[{"x": "one"}]),
    Case(string_forward_ref, valid=[{"point": {"x": 1}}], invalid=[{"point": {"y": 1}}]),
]
