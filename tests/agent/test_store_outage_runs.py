"""An agent on a real PostgreSQL store (tests/postgres_server.py) while the database is down,
and on the embedded SQLite store on a full disk:
a run that needs the store (to load its session, or to claim the paused run it resumes) ends
with ``done(reason="error")`` and ``store_unavailable``, never a raise out of ``run_stream``,
and sends nothing to the model; the paused run stays resumable, and once the database is back
the same runs go through; a run whose end the database missed says so, and its session is
saved before the next run, never replaced by the older stored copy (docs/agent.md, "Pausing
and resuming")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest

from sagents.agent import RunState, SAgent, current_agent_session
from sagents.agent.ag_ui import APPROVAL_REQUEST
from sagents.store import GatewayStore, open_store, parse_store_url
from sagents.store._agents import SqliteAgentStore
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.ag_ui_helpers import customs, post_run, run_input, serve_route
from tests.agent.helpers import (
    RUN_TIMEOUT_S,
    HangingModel,
    assert_settled_once,
    collect,
    done_of,
    paused_on_save,
    saving_tools,
)
from tests.postgres_server import PostgresServer
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio

CTX = SessionContext(session_id="conv-1")
# the pool's wait for a connection (sagents/store/_postgres.py: CONNECT_TIMEOUT_S) comes first
OUTAGE_RUN_S = RUN_TIMEOUT_S + 30.0


@asynccontextmanager
async def _store(server: PostgresServer, tmp_path: Path) -> AsyncIterator[GatewayStore]:
    async with open_store(parse_store_url(server.new_database()), data_dir=tmp_path) as opened:
        yield opened


async def test_a_run_whose_session_cannot_be_loaded_ends_with_store_unavailable_not_a_raise(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    runs: list[str] = []
    async with (
        _store(own_postgres, tmp_path) as store,
        ScriptedModel(["first", "again"]) as model,
    ):
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        ask = [{"role": "user", "content": "hi"}]
        first = done_of(
            await collect(agent, ask, tool_manager=saving_tools(runs), session_context=CTX)
        )
        assert first.reason == "stop"
        own_postgres.stop()
        events = await collect(
            agent, ask, within_s=OUTAGE_RUN_S, tool_manager=saving_tools(runs), session_context=CTX
        )
        done = done_of(events)
        assert done.reason == "error"
        assert done.error is not None
        assert done.error["code"] == "store_unavailable"
        assert "cannot reach the store" in done.error["message"]
        assert len(model.requests) == 1  # nothing sent to the model without its session
        assert [m["content"] for m in done.messages] == ["hi"]
        own_postgres.start()
        again = done_of(
            await collect(agent, ask, tool_manager=saving_tools(runs), session_context=CTX)
        )
        assert again.reason == "stop"
        assert again.messages[-1]["content"] == "again"


async def test_a_resume_while_the_store_is_down_ends_clearly_and_the_state_resumes_later(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    runs: list[str] = []
    async with (
        _store(own_postgres, tmp_path) as store,
        ScriptedModel([tool_call("save", {"path": "x"}), reply("saved")]) as model,
    ):
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        paused = await paused_on_save(agent, runs, CTX)
        assert paused.state is not None
        state_json = paused.state.to_json()
        own_postgres.stop()
        state = RunState.from_json(state_json)
        state.approve(paused.interruptions[0].id)
        events = await collect(
            agent,
            [],
            within_s=OUTAGE_RUN_S,
            tool_manager=saving_tools(runs),
            session_context=CTX,
            state=state,
        )
        done = done_of(events)
        assert done.reason == "error"
        assert done.error is not None
        assert done.error["code"] == "store_unavailable"
        assert runs == []  # the approved call did not run, and was not claimed
        own_postgres.start()
        state = RunState.from_json(state_json)
        state.approve(paused.interruptions[0].id)
        with anyio.fail_after(RUN_TIMEOUT_S):
            resumed = await agent.run(
                state=state, tool_manager=saving_tools(runs), session_context=CTX
            )
        assert runs == ["x"]  # it runs once, now
        assert resumed.output == "saved"
        assert_settled_once(resumed.messages)


async def test_a_resume_on_a_full_disk_ends_clearly_and_runs_once_when_there_is_room(
    small_disk: Path,
) -> None:
    runs: list[str] = []
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    async with ScriptedModel([tool_call("save", {"path": "x"}), reply("saved")]) as model:
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        paused = await paused_on_save(agent, runs, CTX)
        assert paused.state is not None
        filler = fill_disk(small_disk)
        paused.state.approve(paused.interruptions[0].id)
        events = await collect(
            agent, [], tool_manager=saving_tools(runs), session_context=CTX, state=paused.state
        )
        done = done_of(events)
        assert done.reason == "error"
        assert done.error is not None
        assert done.error["code"].startswith("store_")
        assert str(small_disk) in done.error["message"]
        assert runs == []
        filler.unlink()
        with anyio.fail_after(RUN_TIMEOUT_S):
            resumed = await agent.run(
                state=paused.state, tool_manager=saving_tools(runs), session_context=CTX
            )
        assert runs == ["x"]
        assert resumed.output == "saved"


async def test_a_run_that_ends_while_the_database_is_down_is_saved_once_it_is_back(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    @tool(permission="read_only")
    def crash(reason: str) -> str:
        """Note the reason in the session, then the database goes down."""
        session = current_agent_session()
        assert session is not None
        session.audit_status["crashed"] = reason
        own_postgres.stop()
        return "down"

    manager = ToolManager()
    manager.register_tool(crash)
    ask = [{"role": "user", "content": "hi"}]
    script = [reply("first"), tool_call("crash", {"reason": "test"}), reply("answered"), reply("3")]
    async with (
        _store(own_postgres, tmp_path) as store,
        ScriptedModel(script) as model,
    ):
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        first = done_of(await collect(agent, ask, tool_manager=manager, session_context=CTX))
        assert first.error is None
        second = done_of(
            await collect(
                agent, ask, within_s=OUTAGE_RUN_S, tool_manager=manager, session_context=CTX
            )
        )
        assert second.reason == "stop"
        assert second.messages[-1]["content"] == "answered"
        assert second.error is not None
        assert second.error["code"] == "store_unavailable"
        own_postgres.start()
        third = done_of(await collect(agent, ask, tool_manager=manager, session_context=CTX))
        assert third.reason == "stop"
        assert third.audit_status["crashed"] == "test"  # not the stored copy's, from before
        other = SAgent(model=model.chat_model(), store=store)  # another worker
        with anyio.fail_after(RUN_TIMEOUT_S):
            stored = await other.load_session(CTX.session_id)
        assert stored is not None
        assert stored.audit_status["crashed"] == "test"


async def test_an_ag_ui_answer_whose_claim_fails_on_a_full_disk_keeps_its_card_for_a_retry(
    small_disk: Path, tmp_path: Path
) -> None:
    runs: list[str] = []
    store = SqliteAgentStore(path=small_disk / "agents.sqlite3")
    ask = {"id": "u1", "role": "user", "content": "save x"}
    async with ScriptedModel([tool_call("save", {"path": "x"}), reply("saved")]) as model:
        agent = SAgent(model=model.chat_model(), store=store, run_script=False)
        async with (
            serve_route(agent, tmp_path, saving_tools(runs)) as url,
            httpx.AsyncClient() as c,
        ):
            paused = await post_run(c, url, run_input("t1", [ask]))
            [request] = customs(paused, APPROVAL_REQUEST)
            decisions = {"sagents": {"decisions": {request["id"]: {"decision": "allow_once"}}}}
            filler = fill_disk(small_disk)  # the paused run is read, its claim cannot be written
            failed = await post_run(
                c, url, run_input("t1", [ask], run_id="r2", forwarded=decisions)
            )
            filler.unlink()
            again = await post_run(c, url, run_input("t1", [ask], run_id="r3", forwarded=decisions))
    assert failed[-1].type.value == "RUN_ERROR"
    assert failed[-1].code == "store_unavailable"
    assert again[-1].type.value == "RUN_FINISHED"  # the same answer, once the disk has room
    assert again[-1].result == {"sagents": {"reason": "stop"}}
    assert runs == ["x"]  # the approved call ran once, on the retry


async def test_load_session_of_a_session_running_here_answers_while_the_database_is_down(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    model = HangingModel()
    async with _store(own_postgres, tmp_path) as store:
        agent = SAgent(model=model, store=store, run_script=False)
        with anyio.fail_after(OUTAGE_RUN_S):
            running = agent.run_stream([{"role": "user", "content": "hi"}], session_context=CTX)
            async with aclosing(running):
                await anext(running)  # its first piece: the run holds its session now
                own_postgres.stop()
                loaded = await agent.load_session(CTX.session_id)  # the run's: no store read
                own_postgres.start()
    assert loaded is not None
    assert loaded is agent.session(CTX.session_id)
    assert loaded.messages[0]["content"] == "hi"


async def test_closing_while_the_database_is_down_logs_the_unsaved_session_and_returns(
    own_postgres: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @tool(permission="read_only")
    def crash(reason: str) -> str:
        """The database goes down before the run ends."""
        own_postgres.stop()
        return "down"

    manager = ToolManager()
    manager.register_tool(crash)
    ask = [{"role": "user", "content": "hi"}]
    try:
        async with (
            _store(own_postgres, tmp_path) as store,
            ScriptedModel([tool_call("crash", {"reason": "test"}), reply("answered")]) as model,
        ):
            closing = AsyncExitStack()
            agent = await closing.enter_async_context(
                SAgent(model=model.chat_model(), store=store, run_script=False)
            )
            done = done_of(
                await collect(
                    agent, ask, within_s=OUTAGE_RUN_S, tool_manager=manager, session_context=CTX
                )
            )
            assert done.error is not None
            assert done.error["code"] == "store_unavailable"
            caplog.clear()
            with anyio.fail_after(OUTAGE_RUN_S):  # the pool's wait, once: no hang
                await closing.aclose()  # leaves `async with agent`
            lost = [r for r in caplog.records if r.levelname == "ERROR"]
            assert [r.args[0] for r in lost] == [CTX.session_id]  # type: ignore[index]
            assert "cannot reach the store" in lost[0].getMessage()
    finally:
        own_postgres.start()
