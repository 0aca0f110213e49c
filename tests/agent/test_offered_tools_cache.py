"""The tools a request offers are what the session's tools say at that request (docs/agent.md,
"The model seam"): the loop keeps the last request's ``ToolSpec``s only while the offer is the
same, also when a provider changes an export it handed out before, in place."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import ToolManager, tool
from tests.agent.helpers import RUN_TIMEOUT_S, collect, done_of

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hello"}]


class KeepsItsExports(ToolManager):
    """A registry that hands out the same export objects every time (a ToolProvider may) and
    rewrites a description in place as its state changes."""

    def __init__(self) -> None:
        super().__init__()
        self.exports: list[dict[str, Any]] | None = None

    def get_openai_tools(self, strict: bool = False) -> list[dict[str, Any]]:
        if self.exports is None:
            self.exports = super().get_openai_tools(strict=strict)
        return self.exports


def _descriptions(body: dict[str, Any]) -> list[str]:
    return [t["function"]["description"] for t in body.get("tools", [])]


async def test_an_export_changed_in_place_between_requests_is_offered_as_it_is_now() -> None:
    manager = KeepsItsExports()

    @tool(permission="read_only")
    async def count() -> str:
        """Count: 0 so far."""
        assert manager.exports is not None
        manager.exports[0]["function"]["description"] = "Count: 1 so far."
        return "1"

    manager.register_tool(count)
    async with ScriptedModel([tool_call("count", {}), reply("done")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            done = done_of(await collect(agent, USER, tool_manager=manager))
        assert done.reason == "stop", done.error
        assert [_descriptions(body) for body in model.requests] == [
            ["Count: 0 so far."],
            ["Count: 1 so far."],
        ]
