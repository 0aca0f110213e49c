"""Exported tool names: valid, deterministic, reversible within a NameMap."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.errors import ToolNameConflictError, UnknownToolError
from sagents.tool.naming import EXPORTED_NAME_PATTERN, NameMap, to_exported_name

VALID_NAME = st.from_regex(r"\A[a-zA-Z0-9_-]{1,64}\Z")


@given(st.text(max_size=200))
def test_every_name_exports_to_the_allowed_charset_and_length(name: str) -> None:
    exported = to_exported_name(name)
    assert EXPORTED_NAME_PATTERN.match(exported)
    assert to_exported_name(name) == exported


@given(VALID_NAME)
def test_a_valid_name_is_exported_unchanged(name: str) -> None:
    assert to_exported_name(name) == name


@given(st.lists(st.text(max_size=100), unique=True, max_size=30))
def test_a_name_map_reverses_every_exported_name(names: list[str]) -> None:
    mapping = NameMap.build(names)
    for name in names:
        assert mapping.registered(mapping.exported(name)) == name
    assert len(mapping.to_registered) == len(names)


def test_invalid_characters_are_replaced_and_distinguished_by_a_hash() -> None:
    dotted, slashed = to_exported_name("fleet.status"), to_exported_name("fleet/status")
    assert dotted.startswith("fleet_status_")
    assert slashed.startswith("fleet_status_")
    assert dotted != slashed
    assert to_exported_name("").startswith("tool_")


def test_long_names_are_shortened_with_a_stable_suffix() -> None:
    long_a, long_b = "a" * 80, "a" * 79 + "b"
    assert len(to_exported_name(long_a)) == 64
    assert to_exported_name(long_a) != to_exported_name(long_b)
    assert to_exported_name(long_a) == to_exported_name("a" * 80)


def test_two_registered_names_on_one_exported_name_are_a_conflict() -> None:
    mangled = to_exported_name("x.y")
    with pytest.raises(ToolNameConflictError) as caught:
        NameMap.build(["x.y", mangled])
    assert caught.value.details == {"names": ["x.y", mangled], "exported": mangled}


def test_unknown_names_are_unknown_tools() -> None:
    mapping = NameMap.build(["a"])
    with pytest.raises(UnknownToolError):
        mapping.registered("b")
    with pytest.raises(UnknownToolError):
        mapping.exported("b")
