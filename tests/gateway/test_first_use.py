"""What a new user meets first with ``sagents serve``: run_script without ``tools``, a relative
data directory, and a refusal that names every way to allow a call."""

from __future__ import annotations

import pytest

from sagents.gateway import GatewayCallApprover
from sagents.tool import SessionContext, ToolManager, ToolProxy
from tests.gateway.test_one_approval import save, wipe

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", ["save", "wipe"])
async def test_a_refusal_for_a_client_that_cannot_be_asked_names_the_console_and_auto(
    name: str,
) -> None:
    async with ToolManager() as manager:
        manager.register_tool(save)
        manager.register_tool(wipe)
        proxy = ToolProxy(manager, approver=GatewayCallApprover())
        context = SessionContext(session_id="s", permission_mode="ask")
        arguments = {"note": "a"} if name == "save" else {}
        result = await proxy.run_tool(name, arguments, context)
    assert result.error is not None
    assert result.error.code == "not_allowed"
    message = result.error.message
    assert "--approvals console" in message
    assert "--approvals both" in message
    assert "--transport http" in message
    assert "--mode auto" in message
