"""An ``approver=`` that is no :class:`~sagents.tool.Approver` (a plain function, most often) is
refused where it is given, before any event and before the model is asked, rather than denying
the run's first call that needs an approval (docs/tools.md, "Permission modes and approvals")."""

from __future__ import annotations

import pytest

from sagents.agent import AgentSession, SAgent
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
from sagents.tool import ApprovalAnswer, ApprovalRequest, SessionContext, ToolManager, ToolProxy
from tests.agent.helpers import collect, done_of, saving_tools

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "save it"}]


def allow(request: ApprovalRequest) -> ApprovalAnswer:
    return "allow_once"


async def test_a_function_given_to_run_stream_as_the_approver_is_refused_before_any_event() -> None:
    async with ScriptedModel([reply("never")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with pytest.raises(TypeError, match=r"^SAgent\.run_stream\(approver=\.\.\.\)") as caught:
            await collect(agent, USER, tool_manager=ToolManager(), approver=allow)
    assert "<function allow" in str(caught.value)
    assert "async def approve(self, request)" in str(caught.value)
    assert model.requests == []


async def test_a_function_given_to_run_as_the_approver_is_refused_before_the_model_is_asked() -> (
    None
):
    async with ScriptedModel([reply("never")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with pytest.raises(TypeError, match=r"^SAgent\.run\(approver=\.\.\.\)"):
            await agent.run(USER, tool_manager=ToolManager(), approver=allow)  # type: ignore[arg-type]
    assert model.requests == []


def test_a_function_given_to_an_agent_session_as_its_approver_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^AgentSession\(approver=\.\.\.\)"):
        AgentSession(
            SessionContext(session_id="s1"),
            ToolProxy(ToolManager()),
            approver=allow,  # type: ignore[arg-type]  # the mistake
        )


class DuckApprover:
    """No base class: only an ``approve`` method, as the protocol says."""

    def __init__(self) -> None:
        self.asked = 0

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked += 1
        return "allow_once"


async def test_a_duck_typed_approver_answers_the_runs_approvals() -> None:
    runs: list[str] = []
    duck = DuckApprover()
    calls = (ScriptedToolCall(name="save", arguments={"path": "a"}),)
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("saved")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=saving_tools(runs), approver=duck))
    assert done.reason == "stop"
    assert duck.asked == 1
    assert runs == ["a"]
