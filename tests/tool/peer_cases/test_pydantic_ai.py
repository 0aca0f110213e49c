"""pydantic-ai's tool schema cases, run against ``@tool`` and ``get_openai_tools``.

Source: pydantic/pydantic-ai, ``tests/test_tools.py`` (each case names its test there).
``SAME`` means sagents gives the same parameters schema and description; ``DIFFERENT`` marks a
deliberate difference, explained in docs/tool-schema.md ("Peer suites").
"""

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from sagents.errors import ToolDefinitionError
from sagents.tool import ToolManager


def _function(func: Any) -> dict[str, Any]:
    manager = ToolManager()
    manager.register_tool(func)
    (tool,) = manager.get_openai_tools()
    function: dict[str, Any] = tool["function"]
    return function


async def google_style_docstring(foo: int, bar: str) -> str:
    """Do foobar stuff, a lot.

    Args:
        foo: The foo thing.
        bar: The bar thing.
    """
    return f"{foo} {bar}"


def sphinx_style_docstring(foo: int) -> str:
    """Sphinx style docstring.

    :param foo: The foo thing.
    """
    return str(foo)


def numpy_style_docstring(*, foo: int, bar: str) -> str:
    """Numpy style docstring.

    Parameters
    ----------
    foo : int
        The foo thing.
    bar : str
        The bar thing.
    """
    return f"{foo} {bar}"


@pytest.mark.parametrize(
    ("func", "description"),
    [
        (google_style_docstring, "Do foobar stuff, a lot."),  # test_docstring_google
        (sphinx_style_docstring, "Sphinx style docstring."),  # test_docstring_sphinx
        (numpy_style_docstring, "Numpy style docstring."),  # test_docstring_numpy
    ],
)
def test_docstring_styles(func: Any, description: str) -> None:  # SAME
    function = _function(func)
    assert function["description"] == description
    props = function["parameters"]["properties"]
    assert props["foo"] == {"description": "The foo thing.", "type": "integer"}
    if "bar" in props:
        assert props["bar"] == {"description": "The bar thing.", "type": "string"}
    assert function["parameters"]["additionalProperties"] is False


def test_google_style_with_returns() -> None:
    # DIFFERENT in form: pydantic-ai writes <summary>/<returns> XML; sagents appends a plain
    # "Returns:" paragraph. Both keep the information.
    def my_tool(x: int) -> str:
        """A function that does something.

        Args:
            x: The input value.

        Returns:
            str: The result as a string.
        """
        return str(x)

    function = _function(my_tool)
    assert function["description"] == (
        "A function that does something.\n\nReturns: The result as a string."
    )
    assert function["parameters"]["properties"]["x"]["description"] == "The input value."


def test_only_returns_type() -> None:
    def only_returns_type() -> str:
        """

        Returns:
            str: The result as a string.
        """
        return "foo"

    assert _function(only_returns_type)["description"] == "Returns: The result as a string."


def test_docstring_google_no_body() -> None:  # SAME
    def google_style_docstring_no_body(
        foo: int, bar: Annotated[str, Field(description="from fields")]
    ) -> str:
        """
        Args:
            foo: The foo thing.
            bar: The bar thing.
        """
        return f"{foo} {bar}"

    function = _function(google_style_docstring_no_body)
    assert function["description"] == ""
    assert function["parameters"]["properties"] == {
        "foo": {"description": "The foo thing.", "type": "integer"},
        "bar": {"description": "from fields", "type": "string"},
    }


def test_docstring_unknown() -> None:
    # DIFFERENT: pydantic-ai turns **kwargs into additionalProperties; sagents refuses it.
    def unknown_docstring(**kwargs: int) -> str:
        """Unknown style docstring."""
        return str(kwargs)

    with pytest.raises(ToolDefinitionError, match=r"\*\*kwargs"):
        _function(unknown_docstring)


class Foo(BaseModel):
    x: int
    y: str


def test_takes_just_model() -> None:
    # DIFFERENT: pydantic-ai flattens a lone model parameter into the arguments ({x, y});
    # sagents keeps the parameter ({"model": {x, y}}), so every tool is called by its own
    # parameter names and adding a parameter later does not change the call shape.
    def takes_just_model(model: Foo) -> str:
        return f"{model.x} {model.y}"

    parameters = _function(takes_just_model)["parameters"]
    assert parameters["properties"] == {"model": {"$ref": "#/$defs/Foo"}}
    assert parameters["$defs"]["Foo"]["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "string"},
    }


def test_takes_model_and_int() -> None:  # SAME (titles aside: sagents drops them)
    def takes_just_model(model: Foo, z: int) -> str:
        return f"{model.x} {model.y} {z}"

    parameters = _function(takes_just_model)["parameters"]
    assert parameters["properties"] == {"model": {"$ref": "#/$defs/Foo"}, "z": {"type": "integer"}}
    assert parameters["required"] == ["model", "z"]


class Data(TypedDict):
    a: int
    """The first parameter"""
    b: int
    """The second parameter"""


def test_tool_parameters_with_attribute_docstrings() -> None:
    # SAME descriptions; DIFFERENT nesting (the lone parameter is kept, as above).
    def get_score(data: Data) -> int:
        return data["a"] + data["b"]

    data = _function(get_score)["parameters"]["$defs"]["Data"]
    assert data["properties"] == {
        "a": {"description": "The first parameter", "type": "integer"},
        "b": {"description": "The second parameter", "type": "integer"},
    }


def test_json_schema_required_parameters() -> None:  # SAME
    def my_tool_plain(*, a: int = 1, b: int) -> int:
        return a + b

    parameters = _function(my_tool_plain)["parameters"]
    assert parameters["properties"] == {
        "a": {"default": 1, "type": "integer"},
        "b": {"type": "integer"},
    }
    assert parameters["required"] == ["b"]
