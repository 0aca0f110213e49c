"""``@tool`` on methods, as a new user writes them (docs/tool-schema.md)."""

from __future__ import annotations

import pytest

from sagents.errors import ToolDefinitionError
from sagents.tool import ToolManager
from sagents.tool.tool_base import tool


class Counter:
    def __init__(self, start: int) -> None:
        self.start = start

    @tool
    def add(self, n: int) -> int:
        return self.start + n

    @classmethod
    @tool
    def make(cls, n: int) -> int:
        return n


def test_a_method_taken_from_its_class_is_refused_instead_of_exposing_self() -> None:
    tm = ToolManager()
    with pytest.raises(ToolDefinitionError, match="is a method") as caught:
        tm.register_tool(Counter.add)
    assert caught.value.hint is not None
    assert "Counter(...).add" in caught.value.hint
    assert tm.list_all_tools_name() == []


@pytest.mark.anyio
async def test_a_method_bound_to_an_instance_runs_on_that_instance() -> None:
    tm = ToolManager()
    spec = tm.register_tool(Counter(10).add)
    assert list(spec.input_schema["properties"]) == ["n"]
    assert (await tm.run_tool("add", {"n": 1})).text == "11"


@pytest.mark.anyio
async def test_a_classmethod_with_tool_below_it_registers_without_cls() -> None:
    tm = ToolManager()
    spec = tm.register_tool(Counter.make)
    assert list(spec.input_schema["properties"]) == ["n"]
    assert (await tm.run_tool("make", {"n": 4})).text == "4"


@pytest.mark.parametrize("wrapper", [classmethod, staticmethod])
def test_tool_above_classmethod_or_staticmethod_says_which_order_works(wrapper: type) -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="not to a function") as caught:
        tool(wrapper(f))
    assert caught.value.hint is not None
    assert f"@{wrapper.__name__} above @tool" in caught.value.hint


def test_refusing_kwargs_names_kwargs_in_the_hint() -> None:
    def f(**options: int) -> int:
        return len(options)

    with pytest.raises(ToolDefinitionError, match=r"\*\*options") as caught:
        tool(f)
    assert caught.value.hint is not None
    assert "**options" in caught.value.hint
    assert "*args" not in caught.value.hint


@pytest.mark.anyio
async def test_a_nested_function_whose_first_parameter_is_cls_is_a_plain_tool() -> None:
    @tool
    def classify(cls: str) -> str:
        return cls.upper()

    tm = ToolManager()
    spec = tm.register_tool(classify)
    assert list(spec.input_schema["properties"]) == ["cls"]
    assert (await tm.run_tool("classify", {"cls": "spam"})).text == "SPAM"
