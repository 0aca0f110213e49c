"""A waiting run of the AG-UI route across a restart of the serving process, and across two
processes serving one data directory (docs/chat.md, "Approvals and questionnaires"): the run
is a ``RunState`` in the agent's store, what it waits for is kept with the thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from sagents.agent import SAgent
from sagents.agent.ag_ui import (
    APPROVAL_REQUEST,
    APPROVAL_RESULT,
    MAX_INPUT_BYTES,
    QUESTIONNAIRE_REQUEST,
    QUESTIONNAIRE_RESULT,
    THREADS_FILE,
    open_ag_ui_threads,
)
from sagents.store._threads import SqliteThreads
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply, tool_call
from sagents.tool.impl import register_builtin_tools
from sagents.tool.tool_base import tool
from sagents.tool.tool_manager import ToolManager
from tests.agent.ag_ui_helpers import (
    TOKEN,
    customs,
    post_run,
    race,
    run_input,
    serve_route,
)
from tests.agent.helpers import assert_settled_once

pytestmark = pytest.mark.anyio

ASK = {"id": "u1", "role": "user", "content": "delete a.txt"}


def counted_tools(ran: list[str]) -> ToolManager:
    """A write tool that notes each time it runs."""

    @tool(permission="write")
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        ran.append(path)
        return f"deleted {path}"

    manager = ToolManager()
    manager.register_tool(delete_file)
    return manager


def answer(thread_id: str, decisions: dict[str, Any], run_id: str) -> dict[str, Any]:
    return run_input(
        thread_id, [ASK], run_id=run_id, forwarded={"sagents": {"decisions": decisions}}
    )


async def post_raw(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(url, json=body, headers={"Authorization": f"Bearer {TOKEN}"})


async def pause(model: ScriptedModel, data_dir: Path, thread_id: str) -> dict[str, Any]:
    """A first process whose run pauses for the approval, then stops; the request shown."""
    async with (
        serve_route(SAgent(model=model.chat_model()), data_dir, counted_tools([])) as url,
        httpx.AsyncClient() as c,
    ):
        first = await post_run(c, url, run_input(thread_id, [ASK]))
    assert first[-1].result == {"sagents": {"waiting": [customs(first, APPROVAL_REQUEST)[0]["id"]]}}
    return dict(customs(first, APPROVAL_REQUEST)[0])


async def after_restart(
    model: ScriptedModel, data_dir: Path, thread_id: str, decision: dict[str, Any]
) -> tuple[dict[str, Any], list[Any], httpx.Response, list[str], list[dict[str, Any]]]:
    """Pause in one process; in a new one, answer ``decision`` and then answer it again. The
    request shown, the answer's events, the second answer's response, the calls that ran and
    the history."""
    ran: list[str] = []
    request = await pause(model, data_dir, thread_id)
    restarted = SAgent(model=model.chat_model())
    async with (
        serve_route(restarted, data_dir, counted_tools(ran)) as url,
        httpx.AsyncClient() as c,
    ):
        decisions = {request["id"]: decision}
        second = await post_run(c, url, answer(thread_id, decisions, "r2"))
        again = await post_raw(c, url, answer(thread_id, decisions, "r3"))
    history = restarted.session(thread_id).messages  # type: ignore[union-attr]
    return request, second, again, ran, history


async def test_an_answer_after_a_restart_runs_the_call_exactly_once(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        request, second, again, ran, history = await after_restart(
            model, tmp_path, "r1", {"decision": "allow_once"}
        )
    assert request["id"].startswith("approval_")
    assert request["tool_call_id"] != request["id"]  # the client answers its own id
    assert request["tools"] == ["delete_file"]
    assert request["arguments"] == {"path": "a.txt"}
    assert request["offered"] == ["allow_once", "allow_session", "deny"]
    assert ran == ["a.txt"]
    assert customs(second, APPROVAL_RESULT) == [
        {"id": request["id"], "approved": True, "reason": "allow_once"}
    ]
    assert second[-1].result == {"sagents": {"reason": "stop"}}
    assert again.status_code == 422, again.text
    assert "nothing in this thread waits" in again.json()["message"]
    assert_settled_once(history)
    assert [m["content"] for m in history if m["role"] == "tool"] == ["deleted a.txt"]


async def test_a_denial_after_a_restart_never_runs_the_call(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Not deleted.")]
    async with ScriptedModel(script) as model:
        _request, second, again, ran, history = await after_restart(
            model, tmp_path, "r4", {"decision": "deny", "reason": "keep it"}
        )
    assert ran == []
    results = [e for e in second if e.type.value == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert "denied by the user: keep it" in results[0].content
    assert again.status_code == 422, again.text
    assert_settled_once(history)


async def test_an_approval_that_expired_while_the_process_was_down_says_so(
    tmp_path: Path,
) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Not deleted.")]
    ran: list[str] = []
    async with ScriptedModel(script) as model:
        request = await pause(model, tmp_path, "r5")
        store = SqliteThreads(path=tmp_path / THREADS_FILE)  # its time passes while down
        stored = await store.load("r5")
        assert stored is not None
        assert stored.waiting is not None
        for item in stored.waiting["waiting"]["items"]:
            item["expires_at"] = 0.0
        await store.save(stored)
        restarted = SAgent(model=model.chat_model())
        async with (
            serve_route(restarted, tmp_path, counted_tools(ran)) as url,
            httpx.AsyncClient() as c,
        ):
            late = await post_raw(
                c, url, answer("r5", {request["id"]: {"decision": "allow_once"}}, "r2")
            )
            again = await post_raw(
                c, url, answer("r5", {request["id"]: {"decision": "allow_once"}}, "r3")
            )
    assert late.status_code == 422, late.text
    assert late.json() == {
        "error": "invalid_decisions",
        "message": f"{request['id']!r} expired unanswered (denied): it can no longer be answered",
    }
    assert again.json()["message"] == late.json()["message"]
    assert ran == []


async def test_two_answers_racing_to_two_processes_run_the_call_once(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    ran: list[str] = []
    async with ScriptedModel(script) as model:
        request = await pause(model, tmp_path, "r6")
        decisions = {request["id"]: {"decision": "allow_once"}}
        async with (
            serve_route(SAgent(model=model.chat_model()), tmp_path, counted_tools(ran)) as one,
            serve_route(SAgent(model=model.chat_model()), tmp_path, counted_tools(ran)) as two,
            httpx.AsyncClient() as c,
        ):
            outcomes = await race(
                c, [(one, answer("r6", decisions, "r2")), (two, answer("r6", decisions, "r3"))]
            )
    assert ran == ["a.txt"]
    streams = [o for o in outcomes if isinstance(o, list)]
    ran_streams = [s for s in streams if any(e.type.value == "TOOL_CALL_RESULT" for e in s)]
    assert len(ran_streams) == 1, outcomes
    for other in [o for o in outcomes if not any(o is s for s in ran_streams)]:
        if isinstance(other, str):  # it found the run resumed already
            assert "HTTP 422" in other or "HTTP 409" in other, other
        else:  # it lost the claim: a clear error, nothing ran
            assert other[-1].type.value == "RUN_ERROR"
            assert other[-1].code == "run_state_refused"
            assert "resumed already" in other[-1].message


async def test_a_reloaded_page_after_a_restart_shows_the_waiting_card(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        request = await pause(model, tmp_path, "r7")
        async with open_ag_ui_threads(
            SAgent(model=model.chat_model()), tool_manager=counted_tools([]), data_dir=tmp_path
        ) as threads:
            shown = await threads.page_state("r7", "tester")
            other = await threads.page_state("r7", "someone else")
    assert shown["waiting"] == [request]
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]
    assert other == {"messages": [], "state": None, "waiting": []}


async def test_each_of_two_held_calls_is_answered_on_its_own_then_the_run_resumes(
    tmp_path: Path,
) -> None:
    both = ScriptedReply(
        tool_calls=(
            ScriptedToolCall(name="delete_file", arguments={"path": "a.txt"}),
            ScriptedToolCall(name="delete_file", arguments={"path": "b.txt"}),
        )
    )
    ran: list[str] = []
    async with ScriptedModel([both, reply("One deleted.")]) as model:
        agent = SAgent(model=model.chat_model())
        async with (
            serve_route(agent, tmp_path, counted_tools(ran)) as url,
            httpx.AsyncClient() as c,
        ):
            first = await post_run(c, url, run_input("r8", [ASK]))
            a, b = (r["id"] for r in customs(first, APPROVAL_REQUEST))
            partly = await post_run(c, url, answer("r8", {a: {"decision": "allow_once"}}, "r2"))
            ran_before = list(ran)
            rest = await post_run(c, url, answer("r8", {b: {"decision": "deny"}}, "r3"))
        history = agent.session("r8").messages  # type: ignore[union-attr]
    assert first[-1].result == {"sagents": {"waiting": [a, b]}}
    assert partly[-1].result == {"sagents": {"waiting": [b]}}  # b still waits: nothing ran
    assert customs(partly, APPROVAL_RESULT) == [{"id": a, "approved": True, "reason": "allow_once"}]
    assert ran_before == []
    assert ran == ["a.txt"]
    assert customs(rest, APPROVAL_RESULT) == [{"id": b, "approved": False, "reason": "deny"}]
    results = [e.content for e in rest if e.type.value == "TOOL_CALL_RESULT"]
    assert results[0] == "deleted a.txt"
    assert "denied by the user" in results[1]
    assert_settled_once(history)


async def test_a_questionnaire_answered_after_a_restart_gets_its_answers(tmp_path: Path) -> None:
    questions = {
        "title": "Trip",
        "questions": [{"id": "city", "kind": "text", "prompt": "Where?"}],
    }
    script = [tool_call("questionnaire", questions), reply("Rome it is.")]

    def with_questionnaire() -> ToolManager:
        manager = counted_tools([])
        register_builtin_tools(manager, None, names=["questionnaire"])
        return manager

    async with ScriptedModel(script) as model:
        async with (
            serve_route(SAgent(model=model.chat_model()), tmp_path, with_questionnaire()) as url,
            httpx.AsyncClient() as c,
        ):
            first = await post_run(c, url, run_input("r9", [ASK]))
        (asked,) = customs(first, QUESTIONNAIRE_REQUEST)
        async with (
            serve_route(SAgent(model=model.chat_model()), tmp_path, with_questionnaire()) as url,
            httpx.AsyncClient() as c,
        ):
            wrong = await post_raw(c, url, answer("r9", {asked["id"]: {"answers": {"x": 1}}}, "r2"))
            second = await post_run(
                c, url, answer("r9", {asked["id"]: {"answers": {"city": "Rome"}}}, "r3")
            )
    assert asked["id"].startswith("questionnaire_")
    assert asked["questionnaire"]["title"] == "Trip"
    assert asked["time_limit"] == 240.0  # the tool's default
    assert wrong.status_code == 422, wrong.text
    assert wrong.json()["error"] == "invalid_decisions"
    assert customs(second, QUESTIONNAIRE_RESULT) == [
        {"id": asked["id"], "status": "answered", "answers": {"city": "Rome"}}
    ]
    (result,) = [e.content for e in second if e.type.value == "TOOL_CALL_RESULT"]
    assert "Rome" in result
    assert second[-1].result == {"sagents": {"reason": "stop"}}


async def test_a_resume_that_died_elsewhere_leaves_no_card_waiting(tmp_path: Path) -> None:
    """Another process claimed the paused run and was killed before it saved the thread: the
    answer says so, and the card does not come back."""
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Hello again.")]
    ran: list[str] = []
    async with ScriptedModel(script) as model:
        request = await pause(model, tmp_path, "r10")
        stored = await SqliteThreads(path=tmp_path / THREADS_FILE).load("r10")
        assert stored is not None
        assert stored.waiting is not None
        agent = SAgent(model=model.chat_model())
        assert await agent.store.claim_state(stored.waiting["waiting"]["state_id"])  # the dead one
        async with (
            serve_route(agent, tmp_path, counted_tools(ran)) as url,
            httpx.AsyncClient() as c,
        ):
            decisions = {request["id"]: {"decision": "allow_once"}}
            lost = await post_run(c, url, answer("r10", decisions, "r2"))
        async with open_ag_ui_threads(
            SAgent(model=model.chat_model()), tool_manager=counted_tools(ran), data_dir=tmp_path
        ) as threads:
            shown = await threads.page_state("r10", "tester")
        async with (
            serve_route(SAgent(model=model.chat_model()), tmp_path, counted_tools(ran)) as url,
            httpx.AsyncClient() as c,
        ):
            again = {"id": "u2", "role": "user", "content": "hello?"}
            fresh = await post_run(c, url, run_input("r10", [ASK, again], run_id="r3"))
    assert lost[-1].type.value == "RUN_ERROR"
    assert lost[-1].code == "run_state_refused"
    assert "resumed already" in lost[-1].message
    assert ran == []
    assert shown["waiting"] == []
    assert fresh[-1].type.value == "RUN_FINISHED"


async def test_a_denial_given_to_one_process_is_never_overturned_by_another_ones_stale_card(
    tmp_path: Path,
) -> None:
    """Two processes on one data directory: an item denied through one is decided for the
    other too (its cached copy of the thread is not the truth), so answering it again there is
    refused and the denied call never runs."""
    both = ScriptedReply(
        tool_calls=(
            ScriptedToolCall(name="delete_file", arguments={"path": "a.txt"}),
            ScriptedToolCall(name="delete_file", arguments={"path": "b.txt"}),
        )
    )
    ran: list[str] = []
    async with (
        ScriptedModel([both, reply("Done.")]) as model,
        serve_route(SAgent(model=model.chat_model()), tmp_path, counted_tools(ran)) as one,
        serve_route(SAgent(model=model.chat_model()), tmp_path, counted_tools(ran)) as two,
        httpx.AsyncClient() as c,
    ):
        first = await post_run(c, one, run_input("r10", [ASK]))
        a, b = (r["id"] for r in customs(first, APPROVAL_REQUEST))
        denied = await post_run(c, two, answer("r10", {a: {"decision": "deny"}}, "r2"))
        assert customs(denied, APPROVAL_RESULT)[0]["approved"] is False
        overturn = await post_raw(c, one, answer("r10", {a: {"decision": "allow_once"}}, "r3"))
        rest = await post_raw(c, one, answer("r10", {b: {"decision": "allow_once"}}, "r4"))
    assert overturn.status_code == 422, overturn.text
    assert rest.status_code == 200, rest.text
    assert ran == ["b.txt"]  # a.txt was denied: it never runs


async def test_a_body_past_the_limit_is_refused_before_the_rest_of_it_is_read(
    tmp_path: Path,
) -> None:
    """A client announcing 1 GiB gets 413 once the limit is passed, without the route waiting
    for (and holding in memory) the rest of it."""
    async with (
        ScriptedModel([reply("never")]) as model,
        serve_route(SAgent(model=model.chat_model()), tmp_path, counted_tools([])) as url,
    ):
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        head = (
            f"POST /ag-ui HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {1 << 30}\r\n\r\n"
        )
        with anyio.fail_after(60):
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(head.encode() + b"[" + b" " * (MAX_INPUT_BYTES + 1024))
                answer = await stream.receive()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
