"""Durable runs: ``approvals="defer"`` pauses a run with a ``RunState``; ``SAgent.run(state=...)``
resumes it, in this process or another one, and every tool call is settled exactly once
(docs/agent.md, "Pausing and resuming")."""

from __future__ import annotations

import hashlib
import hmac
import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from sagents.agent import (
    DoneEvent,
    ModelSettings,
    QuestionnaireRequestEvent,
    ReasoningPart,
    RunResult,
    RunState,
    SAgent,
)
from sagents.core.events import ApprovalRequestEvent
from sagents.errors import RunStateError
from sagents.skill import SkillManager, SkillProxy
from sagents.store import SqliteAgentStore
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
from sagents.tool import SessionContext, ToolManager, tool
from sagents.tool.impl import register_builtin_tools
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, tool_messages
from tests.agent.test_anthropic import anthropic_model, wire

pytestmark = pytest.mark.anyio

KEY = "k" * 40
USER = [{"role": "user", "content": "go"}]
QUESTIONS = {
    "title": "Trip",
    "questions": [
        {"id": "city", "kind": "single_choice", "prompt": "Where?", "options": ["Paris", "Rome"]},
        {"id": "nights", "kind": "number", "prompt": "Nights?", "integer": True, "minimum": 1},
    ],
}


@pytest.fixture(autouse=True)
def _state_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGENTS_STATE_KEY", KEY)


class Tools:
    """A read-only, a write and a destructive tool that count their runs."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def manager(self, *, questionnaire: bool = False) -> ToolManager:
        runs = self.runs

        @tool(permission="read_only")
        def lookup(key: str) -> str:
            """Look a key up."""
            runs.append(("lookup", {"key": key}))
            return f"value of {key}"

        @tool(permission="write")
        def save(path: str) -> str:
            """Save a file."""
            runs.append(("save", {"path": path}))
            return f"saved {path}"

        @tool(permission="destructive")
        def wipe(path: str) -> str:
            """Wipe a file."""
            runs.append(("wipe", {"path": path}))
            return f"wiped {path}"

        manager = ToolManager()
        for fn in (lookup, save, wipe):
            manager.register_tool(fn)
        if questionnaire:
            register_builtin_tools(manager, None, names=["questionnaire"])
        return manager

    def count(self, name: str) -> int:
        return sum(1 for ran, _ in self.runs if ran == name)


def _batch(*calls: tuple[str, dict[str, Any], str]) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=tuple(ScriptedToolCall(name=n, arguments=a, id=i) for n, a, i in calls)
    )


def _agent(model: ScriptedModel, tmp_store: SqliteAgentStore, **options: Any) -> SAgent:
    return SAgent(model=model.chat_model(), run_script=False, store=tmp_store, **options)


@pytest.fixture
def store(tmp_path: Any) -> SqliteAgentStore:
    return SqliteAgentStore(path=tmp_path / "agents.sqlite3")


async def _run(agent: SAgent, *args: Any, **kwargs: Any) -> RunResult:
    with anyio.fail_after(RUN_TIMEOUT_S):
        return await agent.run(*args, **kwargs)


CTX = SessionContext(session_id="s1")


async def test_a_write_call_pauses_the_run_and_runs_once_when_approved_later(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [
        _batch(("lookup", {"key": "a"}, "c1"), ("save", {"path": "x"}, "c2")),
        reply("all done"),
    ]
    async with ScriptedModel(script) as model:
        agent = _agent(model, store)
        paused = await _run(
            agent, USER, tool_manager=tools.manager(), session_context=CTX, approvals="defer"
        )
        assert paused.interrupted
        assert paused.reason == "interrupted"
        (item,) = paused.interruptions
        assert (item.id, item.kind, item.tool_name, dict(item.arguments)) == (
            "c2",
            "approval",
            "save",
            {"path": "x"},
        )
        assert tools.runs == [("lookup", {"key": "a"})]  # the free call ran before the pause
        assert paused.state is not None
        assert paused.state.usage == {"prompt_tokens": 10, "completion_tokens": 5}
        text = paused.state.to_json()
        # hours later, another worker: a new agent, new tools, the state from its JSON
        tools_later = Tools()
        state = RunState.from_json(text)
        state.approve("c2")
        later = _agent(model, store)
        done = await _run(
            later, state=state, tool_manager=tools_later.manager(), session_context=CTX
        )
    assert done.reason == "stop"
    assert not done.interrupted
    assert done.output == "all done"
    assert tools_later.runs == [
        ("save", {"path": "x"})
    ]  # the approved call, once; lookup not again
    assert_settled_once(done.messages)
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(done.messages)}
    assert results == {"c1": "value of a", "c2": "saved x"}
    sent = model.requests[1]["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["c1", "c2"]


async def test_run_stream_sends_the_request_events_then_done_interrupted(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [_batch(("save", {"path": "x"}, "c1"), ("questionnaire", QUESTIONS, "c2"))]
    events = []
    async with ScriptedModel(script) as model:
        agent = _agent(model, store)
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(
                agent.run_stream(
                    USER,
                    tool_manager=tools.manager(questionnaire=True),
                    session_context=CTX,
                    approvals="defer",
                )
            ) as stream:
                events = [event async for event in stream]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.reason == "interrupted"
    assert done.state is not None
    approval = [e for e in events if isinstance(e, ApprovalRequestEvent)]
    asked = [e for e in events if isinstance(e, QuestionnaireRequestEvent)]
    assert [e.request_id for e in approval] == ["c1"]
    assert [e.request_id for e in asked] == ["c2"]
    assert [q.id for q in asked[0].questionnaire.questions] == ["city", "nights"]
    assert done.to_dict()["state_id"] == done.state.state_id
    assert [i["id"] for i in done.to_dict()["interruptions"]] == ["c1", "c2"]
    assert tools.runs == []


async def test_a_denied_call_gets_its_denial_and_never_runs(store: SqliteAgentStore) -> None:
    tools = Tools()
    script = [_batch(("save", {"path": "x"}, "c1")), reply("understood")]
    async with ScriptedModel(script) as model:
        agent = _agent(model, store)
        manager = tools.manager()
        paused = await _run(
            agent, USER, tool_manager=manager, session_context=CTX, approvals="defer"
        )
        assert paused.state is not None
        paused.state.deny("c1", reason="not that file")
        done = await _run(agent, state=paused.state, tool_manager=manager, session_context=CTX)
    assert tools.runs == []
    (result,) = tool_messages(done.messages)
    assert "denied by the user: not that file" in result["content"]
    assert done.output == "understood"


async def test_approval_for_the_session_holds_in_the_next_run_of_another_worker(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [
        _batch(("save", {"path": "x"}, "c1")),
        _batch(("save", {"path": "y"}, "c2")),  # same run, after the resume: no question
        reply("first"),
        _batch(("save", {"path": "z"}, "c3")),  # the next request, on another agent
        reply("second"),
    ]
    async with ScriptedModel(script) as model:
        paused = await _run(
            _agent(model, store),
            USER,
            tool_manager=tools.manager(),
            session_context=CTX,
            approvals="defer",
        )
        assert paused.state is not None
        paused.state.approve("c1", scope="session")
        first = await _run(
            _agent(model, store),
            state=RunState.from_json(paused.state.to_json()),
            tool_manager=tools.manager(),
            session_context=CTX,
        )
        assert first.reason == "stop"
        assert first.output == "first"
        second = await _run(
            _agent(model, store),
            [*first.messages, {"role": "user", "content": "again"}],
            tool_manager=tools.manager(),
            session_context=CTX,
            approvals="defer",
        )
    assert second.reason == "stop", second.interruptions
    assert [args["path"] for _, args in tools.runs] == ["x", "y", "z"]


async def test_a_destructive_call_is_approved_once_only(store: SqliteAgentStore) -> None:
    tools = Tools()
    async with ScriptedModel([_batch(("wipe", {"path": "x"}, "c1"))]) as model:
        paused = await _run(
            _agent(model, store),
            USER,
            tool_manager=tools.manager(),
            session_context=SessionContext(session_id="s1", permission_mode="auto"),
            approvals="defer",
        )
    assert paused.state is not None
    (item,) = paused.interruptions
    assert item.offered == ("allow_once", "deny")
    with pytest.raises(RunStateError, match="approved once"):
        paused.state.approve("c1", scope="session")
    with pytest.raises(RunStateError, match="waits for no item 'nope'"):
        paused.state.approve("nope")


async def test_a_questionnaire_pauses_and_its_checked_answer_reaches_the_model(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [_batch(("questionnaire", QUESTIONS, "q1")), reply("booked")]
    async with ScriptedModel(script) as model:
        agent = _agent(model, store)
        manager = tools.manager(questionnaire=True)
        paused = await _run(
            agent, USER, tool_manager=manager, session_context=CTX, approvals="defer"
        )
        assert paused.state is not None
        (item,) = paused.interruptions
        assert item.kind == "questionnaire"
        assert item.title == "Trip"
        with pytest.raises(RunStateError, match=r"'nights'.*below the minimum"):
            paused.state.answer("q1", {"city": "Rome", "nights": 0})
        with pytest.raises(RunStateError, match="is a questionnaire item, not an approval"):
            paused.state.approve("q1")
        paused.state.answer("q1", {"city": "Rome", "nights": "3"})
        done = await _run(agent, state=paused.state, tool_manager=manager, session_context=CTX)
    (result,) = tool_messages(done.messages)
    assert "city (Where?): Rome" in result["content"]
    assert "nights (Nights?): 3" in result["content"]
    assert done.output == "booked"


async def _paused(model: ScriptedModel, store: SqliteAgentStore, **options: Any) -> RunState:
    result = await _run(
        _agent(model, store, **options),
        USER,
        tool_manager=Tools().manager(),
        session_context=CTX,
        approvals="defer",
    )
    assert result.state is not None
    return result.state


async def test_an_edited_state_is_refused(store: SqliteAgentStore) -> None:
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1"))]) as model:
        state = await _paused(model, store)
    document = json.loads(state.to_json())
    document["pending"][0]["arguments"]["path"] = "/etc/passwd"
    with pytest.raises(RunStateError, match="signature does not match") as refused:
        RunState.from_json(json.dumps(document))
    assert refused.value.details["reason"] == "signature"
    with pytest.raises(RunStateError, match="signature does not match"):
        RunState.from_json(state.to_json(key=b"another key of forty characters........"))
    with pytest.raises(RunStateError, match="no 'signature'"):
        RunState.from_json(json.dumps({"version": 1}))
    with pytest.raises(RunStateError, match="is JSON"):
        RunState.from_json("{not json")


def _resigned(document: dict[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    signature = hmac.new(KEY.encode(), canonical.encode(), hashlib.sha256).hexdigest()
    return json.dumps({**document, "signature": signature})


async def test_an_old_or_newer_version_is_refused_with_a_clear_error(
    store: SqliteAgentStore,
) -> None:
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1"))]) as model:
        state = await _paused(model, store)
    document = state.to_document()
    with pytest.raises(RunStateError, match="version 0; this sagents reads version 1 \\(an older"):
        RunState.from_json(_resigned({**document, "version": 0}))
    with pytest.raises(RunStateError, match="made by a newer sagents") as refused:
        RunState.from_json(_resigned({**document, "version": 2}))
    assert refused.value.details["reason"] == "version"
    assert RunState.from_json(_resigned(document)).state_id == state.state_id


async def test_a_state_saved_without_tool_choice_spent_still_loads_and_a_bad_one_is_refused(
    store: SqliteAgentStore,
) -> None:
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1"))]) as model:
        state = await _paused(model, store, model_settings=ModelSettings(tool_choice="save"))
    document = state.to_document()
    assert document["tool_choice_spent"] is True
    assert RunState.from_json(state.to_json()).tool_choice_spent
    older = {k: v for k, v in document.items() if k != "tool_choice_spent"}  # an earlier sagents
    loaded = RunState.from_json(_resigned(older))
    assert (loaded.state_id, loaded.tool_choice_spent) == (state.state_id, False)
    with pytest.raises(RunStateError, match="tool_choice_spent") as refused:
        RunState.from_json(_resigned({**document, "tool_choice_spent": "yes"}))
    assert refused.value.details["reason"] == "format"


class Point(BaseModel):
    x: int
    y: int


async def test_a_state_saved_without_output_retries_still_loads_and_a_bad_one_is_refused(
    store: SqliteAgentStore,
) -> None:
    # an answer that did not fit output_type went back once, then the model called save
    async with ScriptedModel([reply("nowhere"), _batch(("save", {"path": "x"}, "c1"))]) as model:
        state = await _paused(model, store, output_type=Point, output_retries=2)
    document = state.to_document()
    assert document["output_retries"] == 1
    assert RunState.from_json(state.to_json()).output_retries == 1
    older = {k: v for k, v in document.items() if k != "output_retries"}  # an earlier sagents
    loaded = RunState.from_json(_resigned(older))
    assert (loaded.state_id, loaded.output_retries) == (state.state_id, 0)
    for bad in ("1", -1, True, 1.5, None):
        with pytest.raises(RunStateError, match="output_retries") as refused:
            RunState.from_json(_resigned({**document, "output_retries": bad}))
        assert refused.value.details["reason"] == "format"


async def test_a_state_of_another_session_or_agent_or_undecided_is_refused(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1")), reply("ok")]) as model:
        state = await _paused(model, store)
        agent = _agent(model, store)
        with pytest.raises(RunStateError, match="not decided yet"):
            await agent.run(state=state, tool_manager=tools.manager(), session_context=CTX)
        state.approve("c1")
        with pytest.raises(RunStateError, match="another session"):
            await agent.run(
                state=state,
                tool_manager=tools.manager(),
                session_context=SessionContext(session_id="intruder"),
            )
        with pytest.raises(RunStateError, match="paused by the agent 'agent', not 'other'"):
            await _agent(model, store, name="other").run(
                state=state, tool_manager=tools.manager(), session_context=CTX
            )
        with pytest.raises(RunStateError, match="no tool 'save'"):
            await agent.run(state=state, tool_manager=ToolManager(), session_context=CTX)
        # refused before anything ran or was claimed: the right resume still works
        done = await _run(agent, state=state, tool_manager=tools.manager(), session_context=CTX)
    assert done.output == "ok"
    assert tools.runs == [("save", {"path": "x"})]


async def test_two_racing_resumes_exactly_one_wins(store: SqliteAgentStore) -> None:
    tools = Tools()
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1")), reply("ok")]) as model:
        state = await _paused(model, store)
        state.approve("c1")
        text = state.to_json()
        outcomes: list[str] = []

        async def resume() -> None:
            try:
                result = await _agent(model, store).run(
                    state=RunState.from_json(text),
                    tool_manager=tools.manager(),
                    session_context=CTX,
                )
                outcomes.append(result.reason)
            except RunStateError as error:
                outcomes.append(str(error.details["reason"]))

        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(resume)
    assert sorted(outcomes) == ["claimed", "claimed", "claimed", "stop"]
    assert tools.runs == [("save", {"path": "x"})]


async def test_cancelling_a_paused_run_settles_its_calls_without_running_them(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [_batch(("lookup", {"key": "a"}, "c1"), ("save", {"path": "x"}, "c2"))]
    async with ScriptedModel(script) as model:
        state = await _paused(model, store)
        state.cancel(reason="the user left")
        done = await _run(
            _agent(model, store), state=state, tool_manager=tools.manager(), session_context=CTX
        )
        assert len(model.requests) == 1  # no model call after the cancel
    assert done.reason == "cancelled"
    assert_settled_once(done.messages)
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(done.messages)}
    assert results["c1"] == "value of a"
    assert "cancelled while it waited for the user (the user left)" in results["c2"]
    assert tools.runs == []


async def test_max_turns_counts_the_turns_before_the_pause(store: SqliteAgentStore) -> None:
    tools = Tools()
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1")), reply("never")]) as model:
        state = await _paused(model, store, max_turns=1)
        assert state.turns == 1
        state.approve("c1")
        done = await _run(
            _agent(model, store, max_turns=1),
            state=state,
            tool_manager=tools.manager(),
            session_context=CTX,
        )
        assert len(model.requests) == 1
    assert done.reason == "max_turns"
    assert done.turns == 1
    assert tools.runs == [("save", {"path": "x"})]
    assert_settled_once(done.messages)


async def test_reasoning_signatures_survive_the_turns_and_a_pause(
    store: SqliteAgentStore,
) -> None:
    """Anthropic refuses the next request without the thinking block's signature: the loop
    keeps neutral messages, and the state keeps them whole."""
    tools = Tools()

    @tool(permission="write")
    def get_weather(city: str) -> str:
        """The weather."""
        tools.runs.append(("get_weather", {"city": city}))
        return "sunny"

    manager = ToolManager()
    manager.register_tool(get_weather)
    async with ScriptedModel(wire("thinking_tool_use")) as server:
        model = anthropic_model(server)
        try:
            agent = SAgent(model=model, run_script=False, store=store)
            paused = await _run(
                agent, USER, tool_manager=manager, session_context=CTX, approvals="defer"
            )
            assert paused.state is not None
            state = RunState.from_json(paused.state.to_json())
            (item,) = state.interruptions
            state.approve(item.id)
            done = await _run(agent, state=state, tool_manager=manager, session_context=CTX)
        finally:
            await model.aclose()
    reasoning = [p for m in done.history for p in m.parts if isinstance(p, ReasoningPart)]
    assert [p.signature for p in reasoning] == [
        "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    ]
    sent = server.requests[1]["messages"][1]["content"][0]
    assert sent["type"] == "thinking"
    assert sent["signature"] == "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    assert tools.runs == [("get_weather", {"city": "Paris"})]


async def test_a_paused_state_is_kept_in_the_store_and_loaded_by_id(
    store: SqliteAgentStore,
) -> None:
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1"))]) as model:
        state = await _paused(model, store)
        agent = _agent(model, store)
        loaded = await agent.load_state(state.state_id)
        missing = await agent.load_state("nope")
    assert loaded is not None
    assert missing is None
    assert loaded.to_document() == state.to_document()


async def test_a_session_lives_in_the_store_across_agents(store: SqliteAgentStore) -> None:
    tools = Tools()
    async with ScriptedModel([reply("hello")]) as model:
        await _run(_agent(model, store), USER, tool_manager=tools.manager(), session_context=CTX)
        session = await _agent(model, store).load_session("s1")
    assert session is not None
    assert [m.role for m in session.history] == ["user", "assistant"]
    assert session.history[-1].text == "hello"


def test_the_key_is_generated_0600_in_the_data_directory_and_refused_when_others_can_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAGENTS_STATE_KEY")
    monkeypatch.setenv("SAGENTS_DATA_DIR", str(tmp_path))
    state = RunState(agent="a", session_id="s", history=(), pending=(), settled={}, turns=0)
    text = state.to_json()
    path = tmp_path / "state.key"
    assert path.stat().st_mode & 0o777 == 0o600
    assert RunState.from_json(text).state_id == state.state_id  # the same key, read back
    path.chmod(0o644)
    with pytest.raises(RunStateError, match="readable by other users") as refused:
        RunState.from_json(text)
    assert refused.value.hint == f"chmod 600 {path}"
    monkeypatch.setenv("SAGENTS_STATE_KEY", "short")
    with pytest.raises(RunStateError, match="at least 32 characters"):
        state.to_json()


async def test_a_worker_sees_the_turns_another_worker_served_since(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [reply("one"), reply("two"), reply("three")]
    async with ScriptedModel(script) as model:
        a, b = _agent(model, store), _agent(model, store)
        history: list[Any] = []
        for agent, text in ((a, "first"), (b, "second"), (a, "third")):
            session = await agent.load_session("s1")
            history = [*(session.messages if session else []), {"role": "user", "content": text}]
            await _run(agent, history, tool_manager=tools.manager(), session_context=CTX)
        stored = await a.load_session("s1")
    assert stored is not None
    assert [m.text for m in stored.history] == ["first", "one", "second", "two", "third", "three"]


async def test_a_skill_loaded_before_the_pause_is_loaded_again_on_resume(
    store: SqliteAgentStore, tmp_path: Path
) -> None:
    folder = tmp_path / "skills" / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Use for research.\nallowed-tools: lookup save\n"
        "---\nLook things up first.\n",
        encoding="utf-8",
    )
    skills = SkillManager()
    skills.add_skill_dir(tmp_path / "skills")
    tools = Tools()
    script = [
        _batch(("load_skill", {"name": "research"}, "c1"), ("save", {"path": "x"}, "c2")),
        reply("done"),
    ]
    async with ScriptedModel(script) as model:
        paused = await _run(
            _agent(model, store),
            USER,
            tool_manager=tools.manager(),
            skill_manager=SkillProxy(skills),
            session_context=CTX,
            approvals="defer",
        )
        assert paused.state is not None
        assert paused.state.skills == ["research"]
        paused.state.approve("c2")
        done = await _run(
            _agent(model, store),  # another worker: new tools, the skill not loaded there
            state=RunState.from_json(paused.state.to_json()),
            tool_manager=tools.manager(),
            skill_manager=SkillProxy(skills),
            session_context=CTX,
        )
    assert done.output == "done"
    assert tools.runs == [("save", {"path": "x"})]
    before = {t["function"]["name"] for t in model.requests[0]["tools"]}
    after = {t["function"]["name"] for t in model.requests[1]["tools"]}
    assert "wipe" in before
    assert "wipe" not in after  # the skill's allowed-tools narrow the resumed session again
    assert {"lookup", "save"} <= after


async def test_calls_refused_past_the_cap_stay_settled_across_the_pause(
    store: SqliteAgentStore,
) -> None:
    tools = Tools()
    script = [_batch(("save", {"path": "x"}, "c1"), ("lookup", {"key": "a"}, "c2")), reply("ok")]
    async with ScriptedModel(script) as model:
        state = await _paused(model, store, max_tool_calls_per_answer=1)
        assert [i.id for i in state.interruptions] == ["c1"]
        state.approve("c1")
        done = await _run(
            _agent(model, store, max_tool_calls_per_answer=1),
            state=state,
            tool_manager=tools.manager(),
            session_context=CTX,
        )
    assert_settled_once(done.messages)
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(done.messages)}
    assert results["c1"] == "saved x"
    assert "too_many_tool_calls" in results["c2"]
    assert tools.runs == [("save", {"path": "x"})]


async def test_bad_arguments_of_run_are_clear_errors(store: SqliteAgentStore) -> None:
    async with ScriptedModel([_batch(("save", {"path": "x"}, "c1"))]) as model:
        state = await _paused(model, store)
        agent = _agent(model, store)
        with pytest.raises(ValueError, match="approvals is 'wait' or 'defer', not 'later'"):
            await agent.run(USER, approvals="later")  # type: ignore[arg-type]  # the bad input
        with pytest.raises(ValueError, match="either messages or a paused run's state"):
            await agent.run(USER, state=state)
