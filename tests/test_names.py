"""Names that said two things, and dead code kept for its callers: each type has one name; an
older public name or method still works, with a warning naming what replaces it."""

from __future__ import annotations

import typing

import pytest

import sagents.gateway
from sagents.gateway import BackgroundStatus, TaskInfo
from sagents.mcp import MCPSupervisor


def test_gateway_task_status_is_a_deprecated_alias_of_background_status() -> None:
    with pytest.warns(DeprecationWarning, match="BackgroundStatus"):
        old = sagents.gateway.TaskStatus
    assert old is BackgroundStatus
    assert typing.get_args(BackgroundStatus) == ("running", "ok", "error", "cancelled", "failed")
    assert typing.get_type_hints(TaskInfo)["status"] == BackgroundStatus


def test_an_unknown_name_of_the_gateway_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = sagents.gateway.no_such_name  # the module's __getattr__ types it: Any


def test_the_dead_supervisor_check_is_deprecated_and_still_answers() -> None:
    supervisor = MCPSupervisor()
    with pytest.warns(DeprecationWarning, match="subscribe_resource"):
        assert supervisor.subscribable("unknown") is False
