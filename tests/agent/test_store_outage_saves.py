"""An agent whose store (the embedded SQLite store on a full disk) cannot keep what a run
leaves: the run's ``done`` says so (``store_unavailable``), the session stays this process's
latest copy, it is saved again before the session's next run (which ends clearly while the
store still fails), and the store's older copy never replaces it (docs/agent.md, "Pausing and
resuming")."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest

from sagents.agent import SAgent, current_agent_session
from sagents.agent.ag_ui import APPROVAL_REQUEST
from sagents.store._agents import SqliteAgentStore
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.ag_ui_helpers import customs, post_run, route_tools, run_input, serve_route
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, collect, done_of
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio

CTX = SessionContext(session_id="conv-1")


@tool(permission="read_only")
def note(text: str) -> str:
    """Note a line in the session's audit status."""
    session = current_agent_session()
    assert session is not None
    session.audit_status.setdefault("notes", []).append(text)
    return "noted"


def noting_tools() -> ToolManager:
    manager = ToolManager()
    manager.register_tool(note)
    return manager


def said(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text} for text in texts]


async def test_a_run_whose_session_was_not_stored_says_so_and_its_turns_are_saved_later(
    small_disk: Path,
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    script = [reply("first"), tool_call("note", {"text": "kept"}), reply("noted"), reply("fourth")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        first = done_of(
            await collect(agent, said("hi"), tool_manager=noting_tools(), session_context=CTX)
        )
        assert first.reason == "stop"
        assert first.error is None
        filler = fill_disk(small_disk)
        second = done_of(
            await collect(
                agent, said("hi", "note it"), tool_manager=noting_tools(), session_context=CTX
            )
        )
        assert second.reason == "stop"  # answered: the user saw it
        assert second.messages[-1]["content"] == "noted"
        assert second.error is not None  # and is told that it was not kept
        assert second.error["code"] == "store_unavailable"
        assert str(small_disk) in second.error["message"]
        third = done_of(
            await collect(
                agent, said("hi", "again"), tool_manager=noting_tools(), session_context=CTX
            )
        )
        assert third.reason == "error"  # still full: the unsaved session is not loaded over
        assert third.error is not None
        assert third.error["code"] == "store_unavailable"
        assert len(model.requests) == 3  # nothing sent to the model
        filler.unlink()
        fourth = done_of(
            await collect(
                agent, said("hi", "again"), tool_manager=noting_tools(), session_context=CTX
            )
        )
        assert fourth.reason == "stop"
        assert fourth.error is None
        assert fourth.audit_status["notes"] == ["kept"]  # the second run's, not the stored copy's
        stored = await store.load_session(CTX.session_id)
        assert stored is not None
        assert json.loads(stored)["audit_status"]["notes"] == ["kept"]


async def test_loading_an_unsaved_session_keeps_its_turns_and_saves_them(
    small_disk: Path,
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    async with ScriptedModel(["first", "second"]) as model:
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        with anyio.fail_after(RUN_TIMEOUT_S):
            await agent.run(said("hi"), session_context=CTX)
            filler = fill_disk(small_disk)
            second = await agent.run(
                [*said("hi"), reply_of("first"), *said("more")], session_context=CTX
            )
        assert second.output == "second"
        assert second.error is not None
        assert second.error["code"] == "store_unavailable"
        filler.unlink()
        with anyio.fail_after(RUN_TIMEOUT_S):
            session = await agent.load_session(CTX.session_id)
        assert session is agent.session(CTX.session_id)
        assert session is not None
        assert session.messages[-1]["content"] == "second"  # not the store's older copy
        other = SAgent(model=model.chat_model(), store=store)  # another worker reads the store
        with anyio.fail_after(RUN_TIMEOUT_S):
            stored = await other.load_session(CTX.session_id)
        assert stored is not None
        assert stored.messages[-1]["content"] == "second"


def reply_of(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


async def test_past_max_sessions_unsaved_sessions_the_oldest_is_dropped_with_an_error(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    await store.load_session("made")  # the file exists: reads go on while the disk is full
    async with ScriptedModel([reply("one"), reply("two"), reply("three")]) as model:
        agent = SAgent(model=model.chat_model(), store=store, run_script=False, max_sessions=1)
        filler = fill_disk(small_disk)
        with anyio.fail_after(RUN_TIMEOUT_S):
            one = await agent.run(said("hi"), session_context=SessionContext(session_id="a"))
            two = await agent.run(said("hi"), session_context=SessionContext(session_id="b"))
        assert one.error is not None
        assert two.error is not None
        filler.unlink()
        with anyio.fail_after(RUN_TIMEOUT_S):
            three = await agent.run(said("hi"), session_context=SessionContext(session_id="c"))
            assert three.error is None
            assert await store.load_session("a") is None  # dropped: never stored
            assert await store.load_session("b") is None  # held, until b's next run
            assert await agent.load_session("b") is not None  # which saves it first
    dropped = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in dropped] == [
        "the session 'a' was never stored and is dropped: more than 1 sessions wait for the store"
    ]
    assert await store.load_session("b") is not None


async def test_an_ag_ui_run_whose_pause_was_not_stored_ends_with_an_error_not_cards(
    small_disk: Path, tmp_path: Path
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    await store.load_session("made")  # the file exists: reads go on while the disk is full
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Kept it."), reply("Done.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), store=store)
        async with (
            serve_route(agent, tmp_path, route_tools()) as url,
            httpx.AsyncClient() as c,
        ):
            filler = fill_disk(small_disk)
            paused = await post_run(c, url, run_input("t1", [user("u1", "delete a.txt")]))
            filler.unlink()
            after = await post_run(c, url, run_input("t1", [user("u2", "go on")], run_id="r2"))
        history = agent.session("t1").messages  # type: ignore[union-attr]
    assert customs(paused, APPROVAL_REQUEST) == []  # no card that could not be answered
    assert paused[-1].type.value == "RUN_ERROR"
    assert paused[-1].code == "store_unavailable"
    assert after[-1].type.value == "RUN_FINISHED"
    assert after[-1].result == {"sagents": {"reason": "stop"}}
    assert_settled_once(history)  # the held call is settled, never run
    [result] = [m["content"] for m in history if m["role"] == "tool"]
    assert result.startswith("Error [cancelled]: this call was never answered")
    assert [m["content"] for m in history if m["role"] == "user"] == ["delete a.txt", "go on"]


def user(message_id: str, text: str) -> dict[str, str]:
    return {"id": message_id, "role": "user", "content": text}


async def test_an_ag_ui_message_whose_run_could_not_load_its_session_stays_in_the_thread(
    small_disk: Path, tmp_path: Path
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    async with ScriptedModel([reply("first"), reply("second"), reply("fourth")]) as model:
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        async with (
            serve_route(agent, tmp_path, route_tools()) as url,
            httpx.AsyncClient() as c,
        ):
            await post_run(c, url, run_input("t1", [user("u1", "one")]))
            filler = fill_disk(small_disk)
            unkept = await post_run(c, url, run_input("t1", [user("u2", "two")], run_id="r2"))
            unloaded = await post_run(c, url, run_input("t1", [user("u3", "three")], run_id="r3"))
            filler.unlink()
            await post_run(c, url, run_input("t1", [user("u4", "four")], run_id="r4"))
    assert unkept[-1].code == "store_unavailable"  # answered, not kept
    assert unloaded[-1].code == "store_unavailable"  # its session could not be loaded
    sent = model.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["one", "two", "three", "four"]


async def test_closing_the_agent_saves_the_sessions_the_store_did_not_keep(
    small_disk: Path,
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    await store.load_session("made")  # the file exists: reads go on while the disk is full
    async with ScriptedModel([reply("one"), reply("two")]) as model:
        filler = fill_disk(small_disk)
        async with SAgent(model=model.chat_model(), store=store, run_script=False) as agent:
            with anyio.fail_after(RUN_TIMEOUT_S):
                one = await agent.run(said("hi"), session_context=SessionContext(session_id="a"))
                two = await agent.run(said("hi"), session_context=SessionContext(session_id="b"))
            assert one.error is not None
            assert two.error is not None
            assert agent.unsaved_sessions == ("a", "b")
            filler.unlink()  # nobody comes back to a or b: closing saves them
        assert len(agent.unsaved_sessions) == 0  # saved
    with anyio.fail_after(RUN_TIMEOUT_S):
        stored_a = await store.load_session("a")
        stored_b = await store.load_session("b")
    assert stored_a is not None
    assert stored_b is not None
    assert '"two"' in stored_b  # the run's answer is in the stored session


async def test_closing_logs_each_session_the_store_still_refuses_and_does_not_raise(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    await store.load_session("made")  # the file exists: reads go on while the disk is full
    async with ScriptedModel([reply("one"), reply("two")]) as model:
        fill_disk(small_disk)
        closing = AsyncExitStack()
        agent = await closing.enter_async_context(
            SAgent(model=model.chat_model(), store=store, run_script=False)
        )
        with anyio.fail_after(RUN_TIMEOUT_S):
            one = await agent.run(said("hi"), session_context=SessionContext(session_id="a"))
            await agent.run(said("hi"), session_context=SessionContext(session_id="b"))
        assert one.error is not None
        caplog.clear()
        with anyio.fail_after(RUN_TIMEOUT_S):
            await closing.aclose()  # leaves `async with agent`, the disk still full: no raise
    lost = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.args[0] for r in lost] == ["a", "b"]  # type: ignore[index]
    for record in lost:
        assert one.error["message"] in record.getMessage()  # the store's error, as the run had it
    assert agent.unsaved_sessions == ("a", "b")  # still held: nothing was dropped silently
