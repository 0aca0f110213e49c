"""Which tools a session is offered, and which calls need an approval."""

from __future__ import annotations

import pytest

from sagents.core._permissions import PermissionClass, PermissionMode
from sagents.core._spec import ToolSource, ToolSpec
from sagents.errors import NotAllowedError
from sagents.gateway._policy import Profile, is_offered
from sagents.tool._approval import approval_needed


def spec(
    permission: PermissionClass, name: str = "srv__tool", server: str | None = "srv"
) -> ToolSpec:
    source = ToolSource(kind="mcp", server=server) if server else ToolSource(kind="local")
    return ToolSpec(name=name, permission=permission, source=source)


@pytest.mark.parametrize(
    ("permission", "mode", "offered"),
    [
        ("read_only", "read_only", True),
        ("write", "read_only", False),
        ("destructive", "read_only", False),
        ("long_task_only", "read_only", False),
        ("disabled", "auto", False),
        ("disabled", "ask", False),
        ("write", "ask", True),
        ("destructive", "ask", True),
        ("destructive", "auto", True),
        ("long_task_only", "auto", True),
    ],
)
def test_mode_decides_what_is_offered(
    permission: PermissionClass, mode: PermissionMode, offered: bool
) -> None:
    assert is_offered(spec(permission), mode) is offered


def test_profile_filters_servers_and_tool_names() -> None:
    by_server = Profile(name="p", servers=frozenset({"a"}))
    by_tool = Profile(name="q", tools=frozenset({"a__x"}))
    assert is_offered(spec("read_only", "a__x", "a"), "ask", by_server)
    assert not is_offered(spec("read_only", "b__x", "b"), "ask", by_server)
    assert is_offered(spec("read_only", "local", None), "ask", by_server)  # local tools stay
    assert is_offered(spec("read_only", "a__x", "a"), "ask", by_tool)
    assert not is_offered(spec("read_only", "a__y", "a"), "ask", by_tool)


@pytest.mark.parametrize(
    ("permission", "mode", "granted", "offered"),
    [
        ("read_only", "ask", set(), None),
        ("write", "ask", set(), ("allow_once", "allow_session", "deny")),
        ("write", "ask", {"srv__tool"}, None),
        ("write", "auto", set(), None),
        ("long_task_only", "ask", set(), ("allow_once", "allow_session", "deny")),
        ("destructive", "auto", set(), ("allow_once", "deny")),
        ("destructive", "ask", {"srv__tool"}, ("allow_once", "deny")),
    ],
)
def test_the_gateway_and_the_proxy_share_one_rule_for_approvals(
    permission: PermissionClass,
    mode: PermissionMode,
    granted: set[str],
    offered: tuple[str, ...] | None,
) -> None:
    request = approval_needed(spec(permission), {}, mode=mode, session_id="s", granted=granted)
    assert (None if request is None else request.offered) == offered


@pytest.mark.parametrize(("permission", "mode"), [("disabled", "auto"), ("write", "read_only")])
def test_a_call_the_mode_refuses_is_not_allowed(
    permission: PermissionClass, mode: PermissionMode
) -> None:
    with pytest.raises(NotAllowedError):
        approval_needed(spec(permission), {}, mode=mode, session_id="s")
