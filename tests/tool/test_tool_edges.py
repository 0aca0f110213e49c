"""``@tool`` edges: docstrings of one section, partials and callable instances, attribute
docstrings, ``Returns:`` sections."""

import dataclasses
import functools
from typing import Any

import pytest
from typing_extensions import TypedDict

from sagents.errors import ToolDefinitionError
from sagents.tool import ToolManager
from sagents.tool.tool_base import tool


def _function(manager: ToolManager, name: str) -> dict[str, Any]:
    return next(t["function"] for t in manager.get_openai_tools() if t["function"]["name"] == name)


def only_args(foo: int, bar: str) -> str:
    """Args:
    foo: The foo thing.
    bar: The bar thing.
    """
    return f"{foo} {bar}"


def only_args_indented(foo: int, bar: str) -> str:
    """Args:
    foo: The foo thing.
    bar: The bar thing.
    """
    return f"{foo} {bar}"


@pytest.mark.parametrize("func", [only_args, only_args_indented])
def test_a_google_docstring_with_only_args_gives_parameter_descriptions(func: Any) -> None:
    manager = ToolManager()
    manager.register_tool(func)
    function = _function(manager, func.__name__)
    assert function["description"] == ""
    assert function["parameters"]["properties"]["foo"]["description"] == "The foo thing."
    assert function["parameters"]["properties"]["bar"]["description"] == "The bar thing."


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.

    Returns:
        The sum of a and b.
    """
    return a + b


def test_a_returns_section_is_kept_in_the_description() -> None:
    manager = ToolManager()
    manager.register_tool(add)
    assert _function(manager, "add")["description"] == (
        "Add two numbers.\n\nReturns: The sum of a and b."
    )


@pytest.mark.anyio
async def test_a_partial_is_a_tool_without_its_fixed_arguments() -> None:
    manager = ToolManager()
    manager.register_tool(tool(name="add_two")(functools.partial(add, b=2)))
    manager.register_tool(tool(functools.partial(add, 1)))  # named after its function
    function = _function(manager, "add_two")
    assert list(function["parameters"]["properties"]) == ["a"]
    assert function["description"].startswith("Add two numbers.")
    assert function["parameters"]["properties"]["a"]["description"] == "The first."
    assert list(_function(manager, "add")["parameters"]["properties"]) == ["b"]
    result = await manager.run_tool("add_two", {"a": 1})
    assert result.structured == {"result": 3}
    refused = await manager.run_tool("add_two", {"a": 1, "b": 5})  # the host fixed b
    assert refused.error is not None
    assert refused.error.code == "invalid_arguments"


class Search:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __call__(self, query: str) -> str:
        """Search the index.

        Args:
            query: What to look for.
        """
        return self.prefix + query


@pytest.mark.anyio
async def test_a_callable_instance_is_a_tool_once_named() -> None:
    manager = ToolManager()
    manager.register_tool(tool(name="search")(Search("hit: ")))
    function = _function(manager, "search")
    assert function["description"] == "Search the index."
    assert function["parameters"]["properties"]["query"]["description"] == "What to look for."
    assert (await manager.run_tool("search", {"query": "x"})).structured is None
    assert (await manager.run_tool("search", {"query": "x"})).content[0].text == "hit: x"  # type: ignore[union-attr]  # a text block


def test_a_callable_instance_without_a_name_is_refused_clearly() -> None:
    with pytest.raises(ToolDefinitionError, match="needs a non-empty name") as caught:
        tool(Search("x"))
    assert "name=" in (caught.value.hint or "")


class Scores(TypedDict):
    home: int
    """Goals of the home team."""
    away: int
    """Goals of the away team."""


@dataclasses.dataclass
class Window:
    days: int
    """How many days back."""


def record(scores: Scores, window: Window) -> str:
    return f"{scores} {window}"


def test_attribute_docstrings_of_typeddicts_and_dataclasses_become_descriptions() -> None:
    manager = ToolManager()
    manager.register_tool(record)
    defs = _function(manager, "record")["parameters"]["$defs"]
    assert defs["Scores"]["properties"]["home"]["description"] == "Goals of the home team."
    assert defs["Scores"]["properties"]["away"]["description"] == "Goals of the away team."
    assert defs["Window"]["properties"]["days"]["description"] == "How many days back."
