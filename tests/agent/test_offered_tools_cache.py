"""The tools a request offers are what the session's tools say at that request (docs/agent.md,
"The model seam"): the loop keeps the last request's ``ToolSpec``s only while the offer is the
same, also when a provider changes an export it handed out before, in place."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sagents.agent import SAgent
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager, ToolProxy, tool
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


# The offer is kept for a run's later model calls while the session's tools stay the same
# (their revision: ToolManager.revision, ToolProxy.revision); each change below is offered to
# the very next model call.


def _names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def _run(manager: Any, script: list[Any]) -> list[dict[str, Any]]:
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            done = done_of(await collect(agent, USER, tool_manager=manager))
        assert done.reason == "stop", done.error
        return list(model.requests)


def _count_exports(manager: ToolManager) -> list[int]:
    """Count the manager's exports from now on (in the list returned, as it goes)."""
    exports = [0]
    export = manager.get_openai_tools

    def counted(strict: bool = False) -> list[dict[str, Any]]:
        exports[0] += 1
        return export(strict=strict)

    manager.get_openai_tools = counted  # type: ignore[method-assign]
    return exports


@tool(permission="read_only")
async def extra() -> str:
    """A tool registered while the run goes on."""
    return "extra"


async def test_a_tool_registered_by_a_call_is_offered_to_the_next_model_call() -> None:
    manager = ToolManager()

    @tool(permission="read_only")
    async def grow() -> str:
        """Register another tool."""
        manager.register_tool(extra)
        return "grown"

    manager.register_tool(grow)
    requests = await _run(manager, [tool_call("grow", {}), tool_call("extra", {}), reply("done")])
    assert [_names(body) for body in requests] == [
        ["grow"],
        ["extra", "grow"],
        ["extra", "grow"],
    ]


async def test_a_tool_removed_by_a_call_is_no_longer_offered() -> None:
    manager = ToolManager()

    @tool(permission="read_only")
    async def shrink() -> str:
        """Remove the other tool."""
        manager.unregister_tool("extra")
        return "shrunk"

    manager.register_tool(shrink)
    manager.register_tool(extra)
    requests = await _run(manager, [tool_call("shrink", {}), reply("done")])
    assert [_names(body) for body in requests] == [["extra", "shrink"], ["shrink"]]


async def test_a_whitelist_widened_by_a_call_is_offered_to_the_next_model_call() -> None:
    manager = ToolManager()
    proxies: list[ToolProxy] = []

    @tool(permission="read_only")
    async def widen() -> str:
        """Let the session see the other tool."""
        proxies[0].allow(["extra"])
        return "widened"

    manager.register_tool(extra)
    manager.register_tool(widen)
    proxy = ToolProxy([manager], available_tools=["widen"])
    proxies.append(proxy)
    requests = await _run(proxy, [tool_call("widen", {}), reply("done")])
    assert [_names(body) for body in requests] == [["widen"], ["extra", "widen"]]


async def test_the_session_tools_are_exported_once_per_run_while_they_stay_the_same() -> None:
    manager = ToolManager()
    manager.register_tool(extra)
    exports = _count_exports(manager)
    script = [tool_call("extra", {}), tool_call("extra", {}), reply("done")]
    requests = await _run(manager, script)
    assert [_names(body) for body in requests] == [["extra"]] * 3
    assert exports == [1]


async def test_a_provider_that_keeps_no_revision_is_asked_for_every_model_call() -> None:
    manager = KeepsItsExports()  # a subclass: it may export otherwise, so nothing is kept
    manager.register_tool(extra)
    exports = _count_exports(manager)
    requests = await _run(manager, [tool_call("extra", {}), reply("done")])
    assert [_names(body) for body in requests] == [["extra"], ["extra"]]
    assert exports == [2]
    assert ToolProxy([manager]).revision is None


@tool(permission="write")
async def write() -> str:
    """A tool a read-only session is not offered."""
    return "written"


async def test_a_session_offer_is_kept_across_its_runs_while_its_tools_stay_the_same() -> None:
    manager = ToolManager()
    manager.register_tool(extra)
    manager.register_tool(write)
    exports = _count_exports(manager)
    auto = SessionContext(session_id="kept", permission_mode="auto")
    read_only = SessionContext(session_id="kept", permission_mode="read_only")
    script = [reply("one"), reply("two"), reply("three"), reply("four")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        for context in (auto, auto):
            done = done_of(
                await collect(agent, USER, tool_manager=manager, session_context=context)
            )
            assert done.reason == "stop", done.error
        assert exports == [1]  # the second run offered what the first one did
        manager.unregister_tool("extra")  # between runs: the next one offers what is left
        done = done_of(await collect(agent, USER, tool_manager=manager, session_context=auto))
        assert done.reason == "stop", done.error
        # the same session in read-only mode: offered only read-only tools (none left)
        done = done_of(await collect(agent, USER, tool_manager=manager, session_context=read_only))
        assert done.reason == "stop", done.error
        bodies = list(model.requests)
    assert [_names(body) for body in bodies] == [
        ["extra", "write"],
        ["extra", "write"],
        ["write"],
        [],
    ]
    assert exports == [3]


def test_a_registry_revision_changes_with_each_registration_and_removal() -> None:
    manager = ToolManager()
    proxy = ToolProxy([manager], available_tools=[])
    seen = [manager.revision]
    proxies = [proxy.revision]
    manager.register_tool(extra)
    seen.append(manager.revision)
    proxies.append(proxy.revision)
    proxy.allow(["extra"])
    proxies.append(proxy.revision)
    proxy.restrict([])
    proxies.append(proxy.revision)
    manager.unregister_tool("extra")
    seen.append(manager.revision)
    proxies.append(proxy.revision)
    assert len(set(seen)) == 3
    assert len(set(proxies)) == 5
    assert ToolProxy([proxy]).revision == (0, proxy.revision)
