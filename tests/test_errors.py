import inspect

import pytest

from sagents import errors
from sagents.errors import ConfigError, InvalidArgumentsError, SagentsError, UnknownToolError


def _error_classes() -> list[type[SagentsError]]:
    return [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, SagentsError)
    ]


def test_every_error_class_has_its_own_code() -> None:
    codes = [cls.__dict__.get("code") for cls in _error_classes()]
    assert None not in codes
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_is_drawn_in_the_tree_with_its_code(cls: type[SagentsError]) -> None:
    doc = errors.__doc__ or ""
    line = next((ln for ln in doc.splitlines() if f" {cls.__name__} " in ln + " "), None)
    assert line is not None, f"{cls.__name__} is missing from the tree in errors.py"
    assert cls.code in line


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_errors_round_trip_through_their_dict(cls: type[SagentsError]) -> None:
    original = SagentsError.from_dict(
        {"code": cls.code, "message": "boom", "hint": "try again", "details": {"k": 1}}
    )
    rebuilt = SagentsError.from_dict(original.to_dict())
    assert type(rebuilt) is cls
    assert (rebuilt.message, rebuilt.hint, rebuilt.details) == ("boom", "try again", {"k": 1})


def test_unknown_code_keeps_the_code_in_details() -> None:
    rebuilt = SagentsError.from_dict({"code": "from_the_future", "message": "m"})
    assert type(rebuilt) is SagentsError
    assert rebuilt.details["code"] == "from_the_future"


def test_config_error_names_file_and_key() -> None:
    error = ConfigError("not a number", file="servers.json", key="mcpServers.x.timeout")
    assert "servers.json" in str(error)
    assert "mcpServers.x.timeout" in str(error)
    assert error.details == {"file": "servers.json", "key": "mcpServers.x.timeout"}


def test_subclass_relations_let_callers_catch_broadly() -> None:
    with pytest.raises(errors.ToolCallError):
        raise UnknownToolError("no tool 'x'")
    assert issubclass(InvalidArgumentsError, SagentsError)


def test_reusing_a_code_is_refused() -> None:
    with pytest.raises(TypeError, match="already used"):
        type("Dup", (SagentsError,), {"code": "unknown_tool"})
