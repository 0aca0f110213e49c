"""@tool, LocalTool binding and invocation, injected parameters, lazy resolution."""

import dataclasses
import enum
import functools
import threading
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from sagents.core._permissions import ToolAnnotations
from sagents.errors import InvalidArgumentsError, ToolDefinitionError, ToolExecutionError
from sagents.tool._context import InjectedArg, SessionContext
from sagents.tool._local_tool import LocalTool, build_local_tool
from sagents.tool.tool_base import discovered_tools, get_local_tool, tool
from sagents.tool.tool_schema import ToolSpec

CONTEXT = SessionContext(session_id="s1", user_id="alice", trusted={"tenant": "acme"})


@tool(name="get_weather", description="按城市名查询天气")
async def get_weather(city: str) -> dict:  # type: ignore[type-arg]  # the README's example, verbatim
    return {"city": city, "temp_c": 23, "condition": "sunny"}


@tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool()
def ping() -> str:
    return "pong"


class Shape(enum.Enum):
    CIRCLE = "circle"
    SQUARE = "square"


@dataclasses.dataclass
class Size:
    width: int
    height: int = 1


class Owner(BaseModel):
    name: str


class Tags(TypedDict):
    first: str


def convert(
    shape: Shape,
    size: Size,
    owner: Owner,
    tags: Tags,
    pair: tuple[int, str],
    labels: set[str],
) -> dict[str, Any]:
    return {
        "shape": shape,
        "size": size,
        "owner": owner,
        "tags": tags,
        "pair": pair,
        "labels": labels,
    }


def _local(func: Any) -> LocalTool:
    local = get_local_tool(func)
    assert local is not None
    return local


def test_seed_example_registers_under_its_name_with_its_description() -> None:
    spec = _local(get_weather).spec
    assert isinstance(spec, ToolSpec)
    assert spec.name == "get_weather"
    assert spec.description == "按城市名查询天气"
    assert spec.input_schema == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    assert spec.output_schema == {"type": "object"}
    assert spec.source.kind == "local"
    assert spec.permission == "write"


@pytest.mark.anyio
async def test_seed_example_runs_and_stays_callable() -> None:
    assert await get_weather("Paris") == {"city": "Paris", "temp_c": 23, "condition": "sunny"}
    result = await _local(get_weather).invoke({"city": "北京"}, CONTEXT)
    assert result["city"] == "北京"


def test_all_three_decorator_forms_return_the_function_itself() -> None:
    assert add(2, 3) == 5
    assert ping() == "pong"
    assert _local(add).spec.name == "add"
    assert _local(ping).spec.name == "ping"
    assert _local(add).func is add


def test_docstring_gives_the_description_and_parameter_descriptions() -> None:
    spec = _local(add).spec
    assert spec.description == "Add two numbers."
    assert spec.input_schema["properties"]["a"]["description"] == "The first number."
    assert spec.input_schema["properties"]["b"] == {
        "type": "integer",
        "default": 1,
        "description": "The second number.",
    }


def test_decorated_functions_are_discovered_in_order_and_undecorated_are_not() -> None:
    names = [t.name for t in discovered_tools()]
    assert names.index("get_weather") < names.index("add") < names.index("ping")
    assert get_local_tool(convert) is None


def test_discovered_tools_returns_a_copy() -> None:
    snapshot = discovered_tools()
    snapshot.clear()
    assert discovered_tools()


@pytest.mark.parametrize(
    "source",
    [
        "def f(*args: int) -> None: ...",
        "def f(**kwargs: int) -> None: ...",
        "def f(a: int, /) -> None: ...",
    ],
)
def test_star_args_and_positional_only_are_refused_when_the_decorator_runs(source: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError) as caught:
        tool(namespace["f"])
    assert "f" in caught.value.message
    assert caught.value.details["parameter"] in ("args", "kwargs", "a")


def test_something_not_callable_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="must be a function"):
        build_local_tool(42)  # type: ignore[arg-type]


def test_arguments_are_converted_to_the_annotated_python_values() -> None:
    kwargs = build_local_tool(convert).bind(
        {
            "shape": "square",
            "size": {"width": "3"},
            "owner": {"name": "bob"},
            "tags": {"first": "x"},
            "pair": [1, "a"],
            "labels": ["a", "a", "b"],
        },
        CONTEXT,
    )
    assert kwargs["shape"] is Shape.SQUARE
    assert kwargs["size"] == Size(width=3, height=1)
    assert kwargs["owner"] == Owner(name="bob")
    assert kwargs["tags"] == {"first": "x"}
    assert kwargs["pair"] == (1, "a")
    assert kwargs["labels"] == {"a", "b"}


def test_lax_validation_turns_numeric_strings_into_numbers() -> None:
    assert _local(add).bind({"a": "5", "b": "6"}, CONTEXT) == {"a": 5, "b": 6}


def test_invalid_arguments_list_every_problem_with_its_path() -> None:
    local = build_local_tool(convert)
    with pytest.raises(InvalidArgumentsError) as caught:
        local.bind({"shape": "hexagon", "size": {}, "extra": 1}, CONTEXT)
    problems = caught.value.details["problems"]
    assert any(p.startswith("shape:") for p in problems)
    assert any(p.startswith("size.width:") for p in problems)
    assert any(p.startswith("owner:") for p in problems)
    assert any(p.startswith("extra:") for p in problems)
    assert len(problems) >= 6  # shape, size.width, owner, tags, pair, labels, extra


def test_explicit_null_is_kept_for_a_nullable_parameter() -> None:
    def f(note: str | None) -> None: ...

    local = build_local_tool(f)
    assert local.bind({"note": None}, CONTEXT) == {"note": None}
    with pytest.raises(InvalidArgumentsError, match="note"):
        local.bind({}, CONTEXT)


def test_session_context_is_injected_and_absent_from_the_schema() -> None:
    def f(query: str, ctx: SessionContext, maybe: SessionContext | None = None) -> None: ...

    local = build_local_tool(f)
    assert list(local.spec.input_schema["properties"]) == ["query"]
    assert local.injected == {"ctx": SessionContext, "maybe": SessionContext}
    kwargs = local.bind({"query": "q"}, CONTEXT)
    assert kwargs["ctx"] is CONTEXT
    assert kwargs["maybe"] is CONTEXT


def test_injected_arguments_come_from_the_context_never_from_the_model() -> None:
    def f(
        query: str,
        user: Annotated[str, InjectedArg("user_id")],
        tenant: Annotated[str, InjectedArg()],
    ) -> None: ...

    local = build_local_tool(f)
    assert list(local.spec.input_schema["properties"]) == ["query"]
    assert local.bind({"query": "q"}, CONTEXT) == {"query": "q", "user": "alice", "tenant": "acme"}
    with pytest.raises(InvalidArgumentsError) as caught:
        local.bind({"query": "q", "user": "root"}, CONTEXT)
    assert caught.value.details["problems"] == ["user: Extra inputs are not permitted"]


def test_a_missing_injected_value_names_its_key() -> None:
    def f(secret: Annotated[str, InjectedArg("api_token")]) -> None: ...

    with pytest.raises(ToolExecutionError) as caught:
        build_local_tool(f).bind({}, CONTEXT)
    assert caught.value.details["key"] == "api_token"
    assert "'api_token'" in caught.value.message


def test_a_missing_injected_value_with_a_default_keeps_the_default() -> None:
    def f(region: Annotated[str, InjectedArg()] = "eu") -> None: ...

    assert build_local_tool(f).bind({}, CONTEXT) == {}


@pytest.mark.anyio
async def test_sync_tools_run_in_a_worker_thread_and_async_ones_are_awaited() -> None:
    main = threading.get_ident()

    def sync_tool() -> int:
        return threading.get_ident()

    async def async_tool(x: int) -> int:
        await anyio.lowlevel.checkpoint()
        return x * 2

    with anyio.fail_after(10):
        assert await build_local_tool(sync_tool).invoke({}, CONTEXT) != main
        assert await build_local_tool(async_tool).invoke({"x": "4"}, CONTEXT) == 8
    assert build_local_tool(async_tool).is_async
    assert not build_local_tool(sync_tool).is_async


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    @tool
    def increment(self, by: int = 1) -> int:
        """Add to the counter."""
        self.value += by
        return self.value


@pytest.mark.anyio
async def test_a_method_gives_a_tool_bound_to_its_instance_without_self() -> None:
    counter = Counter(10)
    local = _local(counter.increment)
    assert list(local.spec.input_schema["properties"]) == ["by"]
    assert local.spec.name == "increment"
    assert await local.invoke({"by": 5}, CONTEXT) == 15
    assert counter.value == 15
    assert counter.increment() == 16  # still callable as before
    assert all(t.name != "increment" for t in discovered_tools())


def test_permission_is_explicit_else_from_annotations_else_write() -> None:
    def f() -> None: ...

    assert build_local_tool(f).spec.permission == "write"
    read_only = ToolAnnotations(read_only_hint=True)
    assert build_local_tool(f, annotations=read_only).spec.permission == "read_only"
    assert build_local_tool(f, annotations=ToolAnnotations()).spec.permission == "destructive"
    explicit = build_local_tool(f, annotations=read_only, permission="destructive")
    assert explicit.spec.permission == "destructive"
    assert explicit.spec.annotations == read_only


def test_a_missing_forward_reference_fails_naming_the_name() -> None:
    def f(x: "NoSuchType") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    local = build_local_tool(f)  # the decorator itself does not resolve annotations
    with pytest.raises(ToolDefinitionError) as caught:
        _ = local.spec
    assert caught.value.details["name"] == "NoSuchType"
    assert "'NoSuchType'" in caught.value.message


def test_a_forward_reference_resolves_once_its_name_exists() -> None:
    def f(x: "LateDefined") -> None: ...  # type: ignore[name-defined]  # noqa: F821

    local = build_local_tool(f)
    with pytest.raises(ToolDefinitionError):
        _ = local.spec
    globals()["LateDefined"] = list[int]
    try:
        assert local.spec.input_schema["properties"]["x"] == {
            "type": "array",
            "items": {"type": "integer"},
        }
    finally:
        del globals()["LateDefined"]


def test_a_type_without_a_json_schema_fails_clearly() -> None:
    class Opaque:
        pass

    def f(x: Opaque) -> None: ...

    with pytest.raises(ToolDefinitionError, match="argument schema") as caught:
        _ = build_local_tool(f).spec
    assert caught.value.details["tool"].endswith("f")
    assert caught.value.details["parameter"] == "x"
    assert "parameter 'x'" in caught.value.message


def test_output_schema_wraps_non_object_returns_and_omits_text_returns() -> None:
    def numbers() -> list[int]:
        return []

    def text() -> str:
        return ""

    wrapped = build_local_tool(numbers)
    assert wrapped.output_wrapped
    assert wrapped.spec.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "integer"}}},
        "required": ["result"],
    }
    assert build_local_tool(text).spec.output_schema is None
    assert not build_local_tool(text).output_wrapped


def test_name_and_description_overrides_win_over_the_function() -> None:
    local = build_local_tool(add, name="plus", description="Sum.")
    assert (local.spec.name, local.spec.description) == ("plus", "Sum.")
    with pytest.raises(ToolDefinitionError, match="non-empty name"):
        build_local_tool(add, name="")


def test_field_defaults_in_annotated_or_as_the_default_value_make_a_parameter_optional() -> None:
    def f(
        a: Annotated[int, Field(default=3)],
        b: int = Field(default=4, ge=1, description="A b."),
    ) -> None: ...

    local = build_local_tool(f)
    assert "required" not in local.spec.input_schema
    assert local.spec.input_schema["properties"]["b"] == {
        "type": "integer",
        "default": 4,
        "minimum": 1,
        "description": "A b.",
    }
    assert local.bind({}, CONTEXT) == {"a": 3, "b": 4}


class Doubler:
    """Doubles numbers."""

    def __call__(self, x: int) -> int:
        return 2 * x


class AsyncDoubler:
    async def __call__(self, x: int) -> int:
        return 2 * x


@pytest.mark.anyio
async def test_callable_instances_are_tools_too() -> None:
    sync_tool = build_local_tool(Doubler(), name="double")
    async_tool = build_local_tool(AsyncDoubler(), name="adouble")
    assert sync_tool.spec.input_schema["properties"] == {"x": {"type": "integer"}}
    assert sync_tool.spec.description == "Doubles numbers."
    assert async_tool.is_async
    with anyio.fail_after(10):
        assert await sync_tool.invoke({"x": 2}, CONTEXT) == 4
        assert await async_tool.invoke({"x": "3"}, CONTEXT) == 6


@pytest.mark.anyio
async def test_a_functools_wraps_wrapper_keeps_the_tool_options() -> None:
    calls: list[int] = []

    def logged(func: Any) -> Any:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return func(*args, **kwargs)

        return wrapper

    @logged
    @tool(name="plus_one", permission="read_only")
    def plus_one(x: int) -> int:
        return x + 1

    local = _local(plus_one)
    assert (local.spec.name, local.spec.permission) == ("plus_one", "read_only")
    assert list(local.spec.input_schema["properties"]) == ["x"]
    with anyio.fail_after(10):
        assert await local.invoke({"x": 1}, CONTEXT) == 2
    assert calls == [1]


def test_an_unparsable_docstring_becomes_the_description_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import docstring_parser

    def refuse(text: str) -> Any:
        raise docstring_parser.ParseError("bad")

    monkeypatch.setattr(docstring_parser, "parse", refuse)

    def f(x: int) -> None:
        """Does f.  Args: x: weird."""

    assert build_local_tool(f).spec.description == "Does f.  Args: x: weird."
