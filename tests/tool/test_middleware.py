"""Tool middleware on the one call path (docs/tools.md, "Middleware").

``ToolManager(middleware=[...])`` and ``ToolProxy(..., middleware=[...])`` hand each call (the
``ToolRequest``) to every middleware's ``before_call`` in order, and the result to their
``after_call`` in reverse order. A middleware may deny (the model reads the reason), rewrite
the arguments (validated again), ask for a person's approval, and replace or redact a result;
one that raises fails that call only.
"""

from __future__ import annotations

from typing import Any

import pytest

from sagents.core._result import ToolResult
from sagents.tool import (
    AllowAllApprover,
    ApprovalAnswer,
    ApprovalRequest,
    HookDecision,
    SessionContext,
    ToolManager,
    ToolMiddleware,
    ToolProxy,
    ToolRequest,
    tool,
)

pytestmark = pytest.mark.anyio

RAN: list[dict[str, Any]] = []


@tool(name="fleet.configure", permission="write")
async def configure(sn: str, level: int = 1) -> str:
    """Configure a device."""
    RAN.append({"sn": sn, "level": level})
    return f"configured {sn} at level {level}, token=s3cr3t"


@tool(name="fleet.status", permission="read_only")
async def status(sn: str) -> str:
    """A device's status."""
    RAN.append({"sn": sn})
    return f"{sn} is up"


class Recording:
    """Allows everything, and records what it saw."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log
        self.calls: list[ToolRequest] = []

    async def before_call(self, call: ToolRequest) -> HookDecision:
        self.log.append(f"before {self.label}")
        self.calls.append(call)
        return HookDecision.allow()

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        self.log.append(f"after {self.label}")
        return result


class DenyLevels:
    """Refuses levels above 3, and lowers level 3 to 2."""

    async def before_call(self, call: ToolRequest) -> HookDecision:
        arguments = dict(call.arguments or {})  # type: ignore[arg-type]
        level = arguments.get("level", 1)
        if level > 3:
            return HookDecision.deny(f"level {level} is above the fleet's limit of 3")
        if level == 3:
            return HookDecision.allow({**arguments, "level": 2})
        return HookDecision.allow()

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        return result


class Rewrites:
    """Rewrites every call's arguments into ``arguments``."""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    async def before_call(self, call: ToolRequest) -> HookDecision:
        return HookDecision.allow(self.arguments)

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        return result


class Redacts:
    """Replaces a secret in the result's text."""

    async def before_call(self, call: ToolRequest) -> HookDecision:
        return HookDecision.allow()

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        text = result.text.replace("s3cr3t", "[redacted]")
        return ToolResult.from_text(text)


class Breaks:
    """Raises in before_call or after_call."""

    def __init__(self, where: str) -> None:
        self.where = where

    async def before_call(self, call: ToolRequest) -> HookDecision:
        if self.where == "before":
            raise RuntimeError("the policy file is unreadable")
        return HookDecision.allow()

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        if self.where == "after":
            raise RuntimeError("the redaction service is down")
        return result


class Asks:
    async def before_call(self, call: ToolRequest) -> HookDecision:
        return HookDecision.ask("production devices need a second look")

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        return result


class Answering:
    def __init__(self, answer: ApprovalAnswer) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        return self.answer


def _manager(*middleware: ToolMiddleware) -> ToolManager:
    manager = ToolManager(middleware=list(middleware))
    manager.register_tool(configure)
    manager.register_tool(status)
    return manager


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_the_protocol_is_checkable_and_a_decision_says_what_it_may() -> None:
    assert isinstance(DenyLevels(), ToolMiddleware)
    assert HookDecision.deny("no").kind == "deny"
    with pytest.raises(ValueError, match="only an 'allow' decision may rewrite"):
        HookDecision("deny", "no", {"a": 1})
    with pytest.raises(ValueError, match="'allow', 'deny' or 'ask'"):
        HookDecision("maybe")  # type: ignore[arg-type]


async def test_a_denying_middleware_refuses_the_call_with_its_reason() -> None:
    manager = _manager(DenyLevels())
    result = await manager.run_tool("fleet.configure", {"sn": "A1", "level": 5})
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert result.error.message == "level 5 is above the fleet's limit of 3"
    assert RAN == []


async def test_rewritten_arguments_run_and_are_validated_again() -> None:
    manager = _manager(DenyLevels())
    result = await manager.run_tool("fleet.configure", '{"sn": "A1", "level": 3}')
    assert not result.is_error, result
    assert RAN == [{"sn": "A1", "level": 2}]
    RAN.clear()
    invalid = _manager(Rewrites({"sn": "A1", "level": "high"}))
    refused = await invalid.run_tool("fleet.configure", {"sn": "A1"})
    assert refused.error is not None
    assert refused.error.code == "invalid_arguments"
    assert RAN == []


async def test_after_call_redacts_the_result() -> None:
    manager = _manager(Redacts())
    result = await manager.run_tool("fleet.configure", {"sn": "A1"})
    assert result.text == "configured A1 at level 1, token=[redacted]"


async def test_middleware_run_in_order_before_and_in_reverse_after_with_the_call_value() -> None:
    log: list[str] = []
    first, second = Recording("1", log), Recording("2", log)
    manager = _manager(first, second)
    context = SessionContext(session_id="s1")
    (exported,) = [
        t["function"]["name"]
        for t in manager.get_openai_tools()
        if "configure" in t["function"]["name"]
    ]
    assert exported != "fleet.configure"
    result = await manager.run_tool(exported, '{"sn": "A1"}', context, tool_call_id="call_7")
    assert not result.is_error, result
    assert log == ["before 1", "before 2", "after 2", "after 1"]
    (seen,) = first.calls
    assert seen.name == "fleet.configure"  # the registered name, not the exported one
    assert seen.arguments == {"sn": "A1"}  # parsed from the JSON text
    assert seen.session_context is context
    assert seen.tool_call_id == "call_7"


async def test_a_raising_middleware_fails_that_call_only() -> None:
    breaks = Breaks("before")
    manager = _manager(breaks)
    result = await manager.run_tool("fleet.status", {"sn": "A1"})
    assert result.error is not None
    assert result.error.code == "execution_error"
    assert "Breaks failed in before_call" in result.error.message
    assert "the policy file is unreadable" in result.error.message
    assert RAN == []
    after = _manager(Breaks("after"))
    failed = await after.run_tool("fleet.status", {"sn": "A1"})
    assert failed.error is not None
    assert "Breaks failed in after_call" in failed.error.message
    assert "A1 is up" not in failed.text  # the tool ran, but its result is not passed on
    breaks.where = "nowhere"  # mended: the same registry goes on serving
    assert (await manager.run_tool("fleet.status", {"sn": "B2"})).text == "B2 is up"


async def test_a_proxy_middleware_that_asks_makes_even_an_auto_session_ask() -> None:
    manager = _manager()
    approver = Answering("deny")
    proxy = ToolProxy(manager, approver=approver, middleware=[Asks()])
    auto = SessionContext(session_id="s1", permission_mode="auto")
    denied = await proxy.run_tool("fleet.configure", {"sn": "A1"}, auto)
    assert denied.error is not None
    assert denied.error.code == "not_allowed"
    (asked,) = approver.asked
    assert asked.description == "production devices need a second look"
    assert asked.offered == ("allow_once", "deny")  # never remembered for the session
    assert RAN == []
    approver.answer = "allow_once"
    assert not (await proxy.run_tool("fleet.configure", {"sn": "A1"}, auto)).is_error
    assert RAN == [{"sn": "A1", "level": 1}]


async def test_a_proxy_middleware_denies_before_the_approver_is_asked() -> None:
    approver = Answering("allow_once")
    proxy = ToolProxy(_manager(), approver=approver, middleware=[DenyLevels()])
    ask = SessionContext(session_id="s1", permission_mode="ask")
    result = await proxy.run_tool("fleet.configure", {"sn": "A1", "level": 9}, ask)
    assert result.error is not None
    assert result.error.message == "level 9 is above the fleet's limit of 3"
    assert approver.asked == []


async def test_a_registry_asks_nobody_so_its_middleware_asking_refuses() -> None:
    proxy = ToolProxy(_manager(Asks()), approver=AllowAllApprover())
    result = await proxy.run_tool(
        "fleet.status", {"sn": "A1"}, SessionContext(permission_mode="auto")
    )
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "production devices need a second look" in result.error.message
    assert "asks nobody" in result.error.message
    assert RAN == []


async def test_the_agent_loops_calls_go_through_the_registrys_middleware() -> None:
    from sagents.agent import SAgent
    from sagents.testing import ScriptedModel, reply, tool_call
    from tests.agent.helpers import collect, done_of, tool_messages

    log: list[str] = []
    manager = _manager(Recording("loop", log), DenyLevels(), Redacts())
    (exported,) = [
        t["function"]["name"]
        for t in manager.get_openai_tools()
        if "configure" in t["function"]["name"]
    ]
    script = [
        tool_call(exported, {"sn": "A1", "level": 7}, id="c1"),
        tool_call(exported, {"sn": "A1", "level": 3}, id="c2"),
        reply("done"),
    ]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        events = await collect(
            agent,
            [{"role": "user", "content": "configure A1"}],
            tool_manager=manager,
            session_context=SessionContext(permission_mode="auto"),
        )
    messages = tool_messages(done_of(events).messages)
    assert "level 7 is above the fleet's limit of 3" in messages[0]["content"]
    assert messages[1]["content"] == "configured A1 at level 2, token=[redacted]"
    assert RAN == [{"sn": "A1", "level": 2}]
    assert log.count("before loop") == 2


class Responds:
    """Answers every call with its own result, recording the after_call it sees."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before_call(self, call: ToolRequest) -> HookDecision:
        self.log.append("before responds")
        return HookDecision.respond(ToolResult.from_text(f"kept: {call.name}, token=s3cr3t"))

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        self.log.append("after responds")
        return result


def test_a_respond_decision_carries_a_result_and_only_it_does() -> None:
    answer = ToolResult.from_text("kept")
    assert HookDecision.respond(answer).kind == "respond"
    assert HookDecision.respond(answer).result is answer
    with pytest.raises(ValueError, match="only one, carries a ToolResult"):
        HookDecision("respond")
    with pytest.raises(ValueError, match="only one, carries a ToolResult"):
        HookDecision("allow", result=answer)


async def test_a_responding_middleware_answers_without_running_the_tool() -> None:
    log: list[str] = []
    later = Recording("later", log)
    manager = _manager(Recording("first", log), Redacts(), Responds(log), later)
    result = await manager.run_tool("fleet.status", {"sn": "A1"})
    assert not result.is_error
    assert result.text == "kept: fleet.status, token=[redacted]"  # the post step still ran
    assert RAN == []
    # middleware after the responder are not asked; those up to it see the result, in reverse
    assert log == ["before first", "before responds", "after responds", "after first"]
    assert later.calls == []


async def test_a_proxy_respond_still_needs_the_calls_approval() -> None:
    approver = Answering("deny")
    proxy = ToolProxy(_manager(), approver=approver, middleware=[Responds([])])
    ask = SessionContext(session_id="s1", permission_mode="ask")
    denied = await proxy.run_tool("fleet.configure", {"sn": "A1"}, ask)
    assert denied.error is not None
    assert denied.error.code == "not_allowed"
    assert len(approver.asked) == 1
    approver.answer = "allow_once"
    answered = await proxy.run_tool("fleet.configure", {"sn": "A1"}, ask)
    assert answered.text == "kept: fleet.configure, token=s3cr3t"
    assert RAN == []
