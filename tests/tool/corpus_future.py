"""Signature corpus, part 1: a module under ``from __future__ import annotations``.

Each function is one hard case for schema generation; ``CASES`` pairs it with argument samples
(valid and invalid, in the original schema's form) for the strict-export equivalence test.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any, Literal, NotRequired, Optional
from uuid import UUID

from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from sagents.tool._context import InjectedArg, SessionContext
from tests.tool.corpus_types import Case


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(TypedDict):
    street: str
    zip_code: NotRequired[str]


@dataclass
class Box:
    width: float
    height: float = 1.0


class Item(BaseModel):
    """A line of an order."""

    sku: str
    quantity: int = 1


class Order(BaseModel):
    id: int
    items: list[Item]
    note: str | None = None


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


class Filter(BaseModel):
    name: str | None = None
    min_price: float | None = None
    tags: list[str] = []


def basic(city: str, days: int = 3, metric: bool = True) -> dict[str, Any]:
    """Forecast for a city.

    Args:
        city: The city's name.
        days: How many days ahead.
        metric: Celsius when true.
    """
    return {}


def none_default(limit: int | None = None) -> None:
    """A None default makes a parameter optional and nullable."""


def optional_required(note: Optional[str]) -> None:  # noqa: UP045 - the case under test
    """Optional without a default is required (but may be null)."""


def literal(unit: Literal["c", "f"] = "c") -> None:
    """Literal keeps its values."""


def enum_param(color: Color) -> None:
    """An Enum keeps its values."""


def int_enum(level: Level = Level.LOW) -> None:
    """An IntEnum keeps its integer values."""


def union(value: int | str) -> None:
    """A union keeps every member."""


def union_three(value: int | list[str] | None = None) -> None:
    """Three members, one of them null."""


def lists(tags: list[str], scores: list[float] | None = None) -> None:
    """Lists of scalars."""


def dict_param(meta: dict[str, int]) -> None:
    """An open map: faithful only (strict mode cannot express it)."""


def tuple_param(point: tuple[float, float]) -> None:
    """A fixed tuple."""


def var_tuple(ids: tuple[int, ...]) -> None:
    """A variable-length tuple."""


def set_param(labels: set[str]) -> None:
    """A set: unique items."""


def typed_dict(address: Address) -> None:
    """A TypedDict with a NotRequired key."""


def dataclass_param(box: Box) -> None:
    """A dataclass with a default field."""


def model_param(order: Order) -> None:
    """Nested pydantic models under $defs."""


def recursive_model(tree: TreeNode) -> None:
    """A recursive model: $ref to itself."""


def field_annotated(count: Annotated[int, Field(ge=1, le=10, description="How many")] = 1) -> None:
    """Field constraints and description."""


def plain_annotated(query: Annotated[str, "the search text"]) -> None:
    """A plain string in Annotated is the description."""


def alias_later(items: LaterAlias) -> None:
    """An alias defined after the function."""


def numpy_doc(x: int, y: str = "") -> None:
    """Numpy style.

    Parameters
    ----------
    x : int
        The first value.
    y : str
        The second value.
    """


def sphinx_doc(x: int, y: str = "") -> None:
    """Sphinx style.

    :param x: The first value.
    :param y: The second value.
    """


def with_context(query: str, ctx: SessionContext) -> None:
    """The context is injected, never in the schema."""


def with_injected(query: str, user: Annotated[str, InjectedArg("user_id")]) -> None:
    """An injected trusted value, never in the schema."""


def any_param(payload: Any) -> None:
    """Any value: faithful only."""


def no_params() -> None:
    """No parameters at all."""


def string_constraints(
    code: Annotated[str, Field(min_length=2, max_length=5, pattern="^[A-Z]+$")],
) -> None:
    """String constraints (strict mode folds minLength/maxLength into the description)."""


def datetime_param(when: datetime, day: date | None = None) -> None:
    """Formats: date-time and date."""


def uuid_param(ident: UUID) -> None:
    """Format: uuid."""


def returns_model(order_id: int) -> Order:
    """A model return gives an object output schema."""
    raise NotImplementedError


def returns_list(n: int) -> list[int]:
    """A non-object return is wrapped as {"result": ...}."""
    return []


def nested_optional_model(filter: Filter | None = None) -> None:
    """Optional fields inside an optional model: nulls map back to absent at every level."""


def float_constraints(ratio: Annotated[float, Field(gt=0, lt=1)]) -> None:
    """Exclusive bounds."""


def literal_mixed(mode: Literal[1, "auto"] | None = "auto") -> None:
    """Literal values of several types, plus null."""


def keyword_names(title: str, schema: str = "", model_config: int = 0) -> None:
    """Parameter names that clash with JSON Schema keywords and pydantic attributes."""


LaterAlias = list[int]

CASES: list[Case] = [
    Case(
        basic,
        valid=[{"city": "Paris"}, {"city": "Rome", "days": 5, "metric": False}],
        invalid=[{}, {"city": 1}, {"city": "x", "days": "many"}, {"city": "x", "other": 1}],
    ),
    Case(none_default, valid=[{}, {"limit": 5}, {"limit": None}], invalid=[{"limit": "x"}]),
    Case(optional_required, valid=[{"note": "hi"}, {"note": None}], invalid=[{}, {"note": 3}]),
    Case(literal, valid=[{}, {"unit": "f"}], invalid=[{"unit": "k"}, {"unit": 1}]),
    Case(enum_param, valid=[{"color": "red"}], invalid=[{"color": "blue"}, {}]),
    Case(int_enum, valid=[{}, {"level": 2}], invalid=[{"level": 3}, {"level": "LOW"}]),
    Case(union, valid=[{"value": 1}, {"value": "a"}], invalid=[{"value": None}, {"value": []}]),
    Case(
        union_three,
        valid=[{}, {"value": 1}, {"value": ["a"]}, {"value": None}],
        invalid=[{"value": [1]}, {"value": 1.5}],
    ),
    Case(
        lists,
        valid=[{"tags": []}, {"tags": ["a"], "scores": [1.5, 2]}],
        invalid=[{"tags": "a"}, {"tags": [1]}, {"tags": [], "scores": ["x"]}],
    ),
    Case(dict_param, valid=[{"meta": {"a": 1}}, {"meta": {}}], invalid=[{"meta": {"a": "b"}}]),
    Case(
        tuple_param,
        valid=[{"point": [1, 2.5]}],
        invalid=[{"point": [1]}, {"point": [1, 2, 3]}, {"point": ["a", 1]}],
    ),
    Case(var_tuple, valid=[{"ids": []}, {"ids": [1, 2, 3]}], invalid=[{"ids": ["a"]}]),
    Case(set_param, valid=[{"labels": ["a", "b"]}], invalid=[{"labels": "a"}]),
    Case(
        typed_dict,
        valid=[{"address": {"street": "Main"}}, {"address": {"street": "Main", "zip_code": "123"}}],
        invalid=[{"address": {}}, {"address": {"street": 1}}],
    ),
    Case(
        dataclass_param,
        valid=[{"box": {"width": 2}}, {"box": {"width": 2, "height": 3}}],
        invalid=[{"box": {}}, {"box": {"width": "wide"}}],
    ),
    Case(
        model_param,
        valid=[
            {"order": {"id": 1, "items": [{"sku": "a"}]}},
            {"order": {"id": 1, "items": [], "note": None}},
        ],
        invalid=[{"order": {"id": 1}}, {"order": {"id": 1, "items": [{"quantity": 2}]}}],
    ),
    Case(
        recursive_model,
        valid=[{"tree": {"value": 1}}, {"tree": {"value": 1, "children": [{"value": 2}]}}],
        invalid=[{"tree": {"value": 1, "children": [{}]}}],
    ),
    Case(field_annotated, valid=[{}, {"count": 10}], invalid=[{"count": 0}, {"count": 11}]),
    Case(plain_annotated, valid=[{"query": "q"}], invalid=[{}, {"query": 1}]),
    Case(alias_later, valid=[{"items": [1, 2]}], invalid=[{"items": ["a"]}, {"items": 1}]),
    Case(numpy_doc, valid=[{"x": 1}], invalid=[{"y": "a"}]),
    Case(sphinx_doc, valid=[{"x": 1, "y": "b"}], invalid=[{"x": "one"}]),
    Case(with_context, valid=[{"query": "q"}], invalid=[{"query": "q", "ctx": {}}]),
    Case(with_injected, valid=[{"query": "q"}], invalid=[{"query": "q", "user": "root"}]),
    Case(any_param, valid=[{"payload": 1}, {"payload": {"a": [None]}}], invalid=[{}]),
    Case(no_params, valid=[{}], invalid=[{"x": 1}]),
    Case(
        string_constraints,
        valid=[{"code": "AB"}],
        invalid=[{"code": "A"}, {"code": "ABCDEF"}, {"code": "ab"}],
    ),
    Case(
        datetime_param,
        valid=[
            {"when": "2026-01-02T03:04:05Z", "day": None},
            {"when": "2026-01-02T03:04:05Z", "day": "2026-01-02"},
        ],
        invalid=[{"day": "2026-01-02"}],
    ),
    Case(
        uuid_param,
        valid=[{"ident": "12345678-1234-5678-1234-567812345678"}],
        invalid=[{"ident": 5}],
    ),
    Case(returns_model, valid=[{"order_id": 1}], invalid=[{"order_id": "x"}]),
    Case(returns_list, valid=[{"n": 1}], invalid=[{"n": None}]),
    Case(
        nested_optional_model,
        valid=[{}, {"filter": None}, {"filter": {}}, {"filter": {"name": "a", "tags": ["x"]}}],
        invalid=[{"filter": {"min_price": "cheap"}}, {"filter": {"tags": [1]}}],
    ),
    Case(float_constraints, valid=[{"ratio": 0.5}], invalid=[{"ratio": 0}, {"ratio": 1}]),
    Case(
        literal_mixed,
        valid=[{}, {"mode": 1}, {"mode": "auto"}, {"mode": None}],
        invalid=[{"mode": 2}, {"mode": "manual"}],
    ),
    Case(
        keyword_names,
        valid=[{"title": "t"}, {"title": "t", "schema": "s", "model_config": 1}],
        invalid=[{"schema": "s"}],
    ),
]
