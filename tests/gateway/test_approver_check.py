"""The gateway's ``approver=`` that is no :class:`~sagents.tool.Approver` (a plain function,
most often) is refused where it is given, before anything is opened, rather than denying the
first call that needs an approval (docs/tools.md, "Permission modes and approvals")."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagents.gateway import Gateway, GatewaySettings, build_gateway, open_gateway
from sagents.tool import ApprovalAnswer, ApprovalRequest, ToolManager


def allow(request: ApprovalRequest) -> ApprovalAnswer:
    return "allow_once"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GatewaySettings:
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path / "data"))
    return GatewaySettings(config=None, workspace=tmp_path / "ws", transport="http", port=0)


def test_a_function_given_to_a_gateway_as_its_approver_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^Gateway\(approver=\.\.\.\)") as caught:
        Gateway(ToolManager(), approver=allow)  # type: ignore[arg-type]  # the mistake
    assert "<function allow" in str(caught.value)
    assert "async def approve(self, request)" in str(caught.value)


def test_a_function_given_to_open_gateway_is_refused_at_the_call_not_on_entering(
    settings: GatewaySettings,
) -> None:
    with pytest.raises(TypeError, match=r"^open_gateway\(approver=\.\.\.\)"):
        open_gateway(settings, approver=allow)  # type: ignore[arg-type]  # the mistake


def test_a_function_given_to_build_gateway_is_refused(settings: GatewaySettings) -> None:
    with pytest.raises(TypeError, match=r"^build_gateway\(approver=\.\.\.\)"):
        build_gateway(settings, approver=allow)  # type: ignore[arg-type]  # the mistake
