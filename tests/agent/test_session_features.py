"""Skills, run_script against a real MCP server, agents as tools, and the session state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pytest

from sagents.agent import AgentSession, SAgent, current_agent_session
from sagents.core.events import ApprovalRequestEvent, ScriptProgressEvent
from sagents.skill import SkillManager, SkillProxy
from sagents.store import SqliteAgentStore
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import (
    ApprovalAnswer,
    ApprovalRequest,
    InjectedArg,
    SessionContext,
    ToolManager,
    ToolProxy,
    tool,
)
from tests.agent.helpers import assert_settled_once, collect, done_of, tool_messages

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]


@tool(permission="read_only")
def search(q: str) -> str:
    """Search."""
    return f"found {q}"


@tool(permission="write")
def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _manager() -> ToolManager:
    manager = ToolManager()
    manager.register_tool(search)
    manager.register_tool(delete)
    return manager


def _skills(root: Path) -> SkillManager:
    folder = root / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Use for research tasks.\nallowed-tools: search\n"
        "---\nSearch before answering.\n",
        encoding="utf-8",
    )
    skills = SkillManager()
    skills.add_skill_dir(root)
    return skills


class Approvals:
    def __init__(self, answer: ApprovalAnswer) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return self.answer


async def test_load_skill_then_a_tool_outside_its_allowed_tools_is_refused(tmp_path: Path) -> None:
    skills = SkillProxy(_skills(tmp_path / "skills"), available_skills=["research"])
    script = [
        tool_call("load_skill", {"name": "research"}, id="c_load"),
        tool_call("delete", {"path": "x"}, id="c_delete"),
        reply("done"),
    ]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), system_prompt="You help.", run_script=False)
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=ToolProxy([_manager()]),
                skill_manager=skills,
                session_context=SessionContext(permission_mode="auto"),
            )
        )
    assert_settled_once(done.messages)
    loaded, refused = tool_messages(done.messages)
    assert "Search before answering." in loaded["content"]
    assert "not_allowed" in refused["content"] or "unknown_tool" in refused["content"]
    system = model.requests[0]["messages"][0]["content"]
    assert system.startswith("You help.")
    assert "research" in system
    first = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"load_skill", "read_skill_file", "delete", "search"} <= first
    after = {t["function"]["name"] for t in model.requests[1]["tools"]}
    assert "delete" not in after
    assert "search" in after


async def test_a_run_script_turn_calls_a_real_mcp_server_and_projects_the_skills(
    fleet: ToolManager, tmp_path: Path
) -> None:
    code = (
        "from agent_tools import call\n"
        "status = call('fleet__get_device_status', {'sn': 'SN0001'})\n"
        "print('status of', status['sn'])\n"
    )
    script = [
        tool_call("run_script", {"code": code, "tools": [], "description": "one status"}, id="c_s"),
        reply("done"),
    ]
    workspace = tmp_path / "ws"
    skills = SkillProxy(_skills(tmp_path / "skills"), available_skills=["research"])
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        events = await collect(
            agent,
            USER,
            tool_manager=fleet,
            skill_manager=skills,
            session_context=SessionContext(session_id="rs", workspace=str(workspace)),
        )
    done = done_of(events)
    assert done.reason == "stop"
    assert "run_script" in {t["function"]["name"] for t in model.requests[0]["tools"]}
    (result,) = tool_messages(done.messages)
    assert "status of SN0001" in result["content"]
    assert any(isinstance(e, ScriptProgressEvent) and e.is_final for e in events)
    projected = workspace / ".skills" / "research" / "SKILL.md"
    assert projected.is_file()  # init_more projected it
    projected.unlink()
    async with ScriptedModel([tool_call("load_skill", {"name": "research"}), reply("ok")]) as model:
        agent.model = model.chat_model()
        again = done_of(
            await collect(
                agent,
                USER,
                tool_manager=fleet,
                skill_manager=skills,
                session_context=SessionContext(session_id="rs", workspace=str(workspace)),
            )
        )
    assert "Search before answering." in tool_messages(again.messages)[0]["content"]
    assert projected.is_file()  # a later run's load_skill projects into that run's sandbox
    state = agent.session("rs")
    assert state is not None
    assert state.skills is not None
    assert state.skills.active_skills == ("research",)  # the same session state, both runs


async def test_a_script_listing_a_write_tool_asks_once_offering_only_allow_once_and_deny(
    fleet: ToolManager, tmp_path: Path
) -> None:
    code = (
        "from agent_tools import call\n"
        "print(call('fleet__set_device_config', {'sn': 'SN0001', 'key': 'k', 'value': 'v'}))\n"
    )
    arguments = {"code": code, "tools": ["fleet__set_device_config"], "description": "set"}
    approvals = Approvals("allow_once")
    async with ScriptedModel([tool_call("run_script", arguments, id="c_s"), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=fleet,
                session_context=SessionContext(workspace=str(tmp_path / "ws")),
                approver=approvals,
            )
        )
    (request,) = approvals.requests
    assert request.kind == "script"
    assert request.offered == ("allow_once", "deny")
    assert request.script == code
    (result,) = tool_messages(done.messages)
    assert "Error" not in result["content"].splitlines()[0]


class SessionGrants(Approvals):
    """Answers ``allow_session`` where it is offered (a direct call), else ``allow_once``."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return "allow_session" if "allow_session" in request.offered else "allow_once"


async def test_a_tool_allowed_for_the_session_is_not_asked_again_when_a_script_calls_it(
    fleet: ToolManager, tmp_path: Path
) -> None:
    # the user allows set_device_config "for the session" on a direct call; a later script
    # listing it runs without asking again; another session, which allowed nothing, is asked
    code = (
        "from agent_tools import call\n"
        "print(call('fleet__set_device_config', {'sn': 'SN0001', 'key': 'k', 'value': 'v'}))\n"
    )
    direct = {"sn": "SN0002", "key": "k", "value": "v"}
    script = {"code": code, "tools": ["fleet__set_device_config"], "description": "set"}
    replies = [
        tool_call("fleet__set_device_config", direct, id="c_direct"),
        tool_call("run_script", script, id="c_script"),
        reply("done"),
        tool_call("run_script", script, id="c_other"),
        reply("done"),
    ]
    async with ScriptedModel(replies) as model:
        agent = SAgent(model=model.chat_model())
        granting, other = SessionGrants("allow_once"), SessionGrants("allow_once")
        first = done_of(
            await collect(
                agent,
                USER,
                tool_manager=fleet,
                session_context=SessionContext(
                    session_id="A", permission_mode="ask", workspace=str(tmp_path / "ws")
                ),
                approver=granting,
            )
        )
        second = done_of(
            await collect(
                agent,
                USER,
                tool_manager=fleet,
                session_context=SessionContext(
                    session_id="B", permission_mode="ask", workspace=str(tmp_path / "ws")
                ),
                approver=other,
            )
        )
    assert first.reason == "stop", first.error
    assert [r.kind for r in granting.requests] == ["tool_call"]  # the script was not asked
    results = tool_messages(first.messages)
    assert "SN0001: k set to 'v'" in results[1]["content"]
    assert second.reason == "stop", second.error
    (asked,) = other.requests  # one session never approves for another
    assert asked.kind == "script"
    assert asked.session_id == "B"


async def test_an_agent_as_a_tool_gets_only_the_named_subset_of_the_callers_tools() -> None:
    seen_tools: list[list[str]] = []

    def sub_step(body: dict[str, Any]) -> Any:
        seen_tools.append([t["function"]["name"] for t in body.get("tools", [])])
        if len(seen_tools) == 1:
            return tool_call("search", {"q": "cats"}, id="sub_1")
        return reply("cats are found")

    async with ScriptedModel(sub_step) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), run_script=False)
        spec, handler = helper.as_tool(
            "researcher", "Researches a topic.", tools=["search", "nope"]
        )
        manager = _manager()
        manager.register_tool((spec, handler))
        proxy = ToolProxy([manager], available_tools=["researcher", "delete"])
        script = [tool_call("researcher", {"task": "find cats"}, id="c_r"), reply("the end")]
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            done = done_of(await collect(agent, USER, tool_manager=proxy))
    assert tool_messages(done.messages)[0]["content"] == "cats are found"
    assert seen_tools[0] == []  # 'search' is outside the caller's whitelist: never more
    assert sub_model.requests[0]["messages"][-1] == {"role": "user", "content": "find cats"}


async def test_an_agent_as_a_tool_sees_the_allowed_subset() -> None:
    def sub_step(body: dict[str, Any]) -> Any:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return tool_call("search", {"q": "dogs"}, id="sub_1")
        return reply("dogs: " + body["messages"][-1]["content"])

    async with ScriptedModel(sub_step) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), run_script=False)
        manager = _manager()
        manager.register_tool(helper.as_tool("researcher", "Researches.", tools=["search"]))
        async with ScriptedModel([tool_call("researcher", {"task": "t"}), reply("ok")]) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            done = done_of(await collect(agent, USER, tool_manager=manager))
    assert [t["function"]["name"] for t in sub_model.requests[0]["tools"]] == ["search"]
    assert tool_messages(done.messages)[0]["content"] == "dogs: found dogs"


async def test_an_agent_as_a_tool_keeps_no_session_in_its_store(tmp_path: Path) -> None:
    """Each call of an agent tool runs a fresh session under the caller's session id: kept in
    the sub-agent's store, it would stand for the caller's session there (and, in a store the
    two agents share, replace the caller's until the caller's run ends)."""
    store = SqliteAgentStore(path=tmp_path / "agents.sqlite3")
    async with ScriptedModel([reply("found")]) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), store=store, run_script=False)
        manager = _manager()
        manager.register_tool(helper.as_tool("researcher", "Researches.", tools=["search"]))
        async with ScriptedModel([tool_call("researcher", {"task": "t"}), reply("ok")]) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            context = SessionContext(session_id="caller")
            done = done_of(
                await collect(agent, USER, tool_manager=manager, session_context=context)
            )
    assert tool_messages(done.messages)[0]["content"] == "found"
    assert await store.load_session("caller") is None


async def test_tools_reach_the_session_state_and_its_audit_status() -> None:
    @tool(permission="read_only")
    def suggest(
        names: list[str],
        session: Annotated[AgentSession, InjectedArg("agent_session")],
    ) -> str:
        """Record suggested tools."""
        session.audit_status["suggested_tools"] = names
        session.audit_status["tools_expanded"] = True
        assert current_agent_session() is session
        return json.dumps(session.tool_manager.list_all_tools_name())

    manager = ToolManager()
    manager.register_tool(suggest)
    script = [tool_call("suggest", {"names": ["a", "b"]}), reply("ok")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        done = done_of(
            await collect(
                agent, USER, tool_manager=manager, session_context=SessionContext(session_id="x")
            )
        )
    assert done.audit_status == {"suggested_tools": ["a", "b"], "tools_expanded": True}
    assert json.loads(tool_messages(done.messages)[0]["content"]) == ["suggest"]
    state = agent.session("x")
    assert state is not None
    assert state.initialized


async def test_an_agent_tools_approvals_are_asked_through_the_callers_run() -> None:
    def sub_step(body: dict[str, Any]) -> Any:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return tool_call("delete", {"path": "a.txt"}, id="sub_del")
        return reply("sub: " + body["messages"][-1]["content"])

    approvals = Approvals("deny")
    async with ScriptedModel(sub_step) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), run_script=False)
        manager = _manager()
        manager.register_tool(helper.as_tool("cleaner", "Cleans.", tools=["delete"]))
        async with ScriptedModel([tool_call("cleaner", {"task": "t"}), reply("ok")]) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            events = await collect(
                agent,
                USER,
                tool_manager=manager,
                session_context=SessionContext(permission_mode="ask"),
                approver=approvals,
            )
    asked = [e for e in events if isinstance(e, ApprovalRequestEvent)]
    assert [e.tool_call_id for e in asked] == ["sub_del"]
    assert [r.tools for r in approvals.requests] == [("delete",)]
    assert "denied by the user" in tool_messages(done_of(events).messages)[0]["content"]


async def test_a_workspace_that_cannot_be_created_leaves_run_script_out_not_the_run(
    fleet: ToolManager, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    async with ScriptedModel([reply("fine")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=fleet,
                session_context=SessionContext(workspace=str(blocker / "ws")),
            )
        )
    assert done.reason == "stop"
    assert "run_script" not in {t["function"]["name"] for t in model.requests[0]["tools"]}


async def test_sessions_are_bounded_and_the_least_recently_used_is_forgotten() -> None:
    async with ScriptedModel(["a", "b", "c", "d"]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False, max_sessions=2)
        for session_id in ("s1", "s2", "s1", "s3"):
            result = await agent.run(USER, session_context=SessionContext(session_id=session_id))
            assert result.reason == "stop"
    assert agent.session("s1") is not None  # used again before s3 came: kept
    assert agent.session("s3") is not None
    assert agent.session("s2") is None  # the least recently used: forgotten
    with pytest.raises(ValueError, match="max_sessions"):
        SAgent(model="openai:m", max_sessions=0)
