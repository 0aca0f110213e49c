"""A run of the AG-UI route that waits for a decision (docs/chat.md, "Approvals and
questionnaires"): who may answer, what an answer that waits for nothing gets, two answers at
once, and a restart of the serving process in between."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from sagents.agent import SAgent
from sagents.agent.ag_ui import (
    APPROVAL_REQUEST,
    QUESTIONNAIRE_REQUEST,
    AgUiThreads,
    ag_ui_endpoint,
    open_ag_ui_threads,
)
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool.impl import register_builtin_tools
from tests.agent.ag_ui_helpers import (
    TOKEN,
    WAIT_S,
    customs,
    post_run,
    race,
    route_tools,
    run_input,
    serve_app,
    serve_route,
)
from tests.agent.helpers import assert_settled_once

pytestmark = pytest.mark.anyio

OTHER_TOKEN = "ag-ui-other-token"
ASK = {"id": "u1", "role": "user", "content": "delete a.txt"}


async def two_identities(request: Request) -> str | None:
    """Two bearer tokens, two identities."""
    given = request.headers.get("authorization", "")
    return {f"Bearer {TOKEN}": "tester", f"Bearer {OTHER_TOKEN}": "other"}.get(given)


def answer(thread_id: str, decisions: dict[str, Any], run_id: str) -> dict[str, Any]:
    return run_input(
        thread_id, [ASK], run_id=run_id, forwarded={"sagents": {"decisions": decisions}}
    )


async def ask(client: httpx.AsyncClient, url: str, thread_id: str) -> str:
    """Start a run of ``thread_id`` that asks to delete a.txt; the approval's id."""
    first = await post_run(client, url, run_input(thread_id, [ASK]))
    return str(customs(first, APPROVAL_REQUEST)[0]["id"])


async def post_raw(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], token: str = TOKEN
) -> httpx.Response:
    return await client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})


async def test_another_identity_cannot_answer_a_waiting_run(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with (
            serve_route(agent, tmp_path, route_tools(), authorize=two_identities) as url,
            httpx.AsyncClient() as c,
        ):
            item = await ask(c, url, "w1")
            decisions = {item: {"decision": "allow_once"}}
            stolen = await post_raw(c, url, answer("w1", decisions, "r2"), OTHER_TOKEN)
            assert stolen.status_code == 404, stolen.text
            assert stolen.json()["error"] == "unknown_thread"
            # the owner's answer still applies: the other's did nothing
            second = await post_run(c, url, answer("w1", decisions, "r3"))
    results = [e for e in second if e.type.value == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert "deleted a.txt" in results[0].content


async def test_an_answer_to_an_item_that_no_longer_waits_is_a_clear_error(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url, httpx.AsyncClient() as c:
            item = await ask(c, url, "w2")
            decisions = {item: {"decision": "allow_once"}}
            await post_run(c, url, answer("w2", decisions, "r2"))
            again = await post_raw(c, url, answer("w2", decisions, "r3"))
        history = agent.session("w2").messages  # type: ignore[union-attr]
    assert again.status_code == 422, again.text
    assert again.json()["error"] == "invalid_decisions"
    assert "nothing in this thread waits" in again.json()["message"]
    assert_settled_once(history)
    assert sum(1 for m in history if m.get("role") == "tool") == 1


async def test_two_racing_answers_run_the_call_once(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url, httpx.AsyncClient() as c:
            item = await ask(c, url, "w3")
            decisions = {item: {"decision": "allow_once"}}
            outcomes = await race(
                c, [(url, answer("w3", decisions, "r2")), (url, answer("w3", decisions, "r3"))]
            )
        history = agent.session("w3").messages  # type: ignore[union-attr]
    streams = [o for o in outcomes if isinstance(o, list)]
    refusals = [o for o in outcomes if isinstance(o, str)]
    assert len(streams) == 1, outcomes
    assert len(refusals) == 1
    assert "HTTP 409" in refusals[0] or "HTTP 422" in refusals[0], refusals[0]
    results = [e for e in streams[0] if e.type.value == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert_settled_once(history)
    assert sum(1 for m in history if m.get("role") == "tool") == 1
    assert len(model.requests) == 2  # the call's answer reached the model once


async def test_an_answer_to_a_cancelled_item_says_it_was_cancelled(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("after")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url, httpx.AsyncClient() as c:
            item = await ask(c, url, "w5")
            cancel = {"sagents": {"cancel": True}}
            await post_run(c, url, run_input("w5", [ASK], run_id="r2", forwarded=cancel))
            late = await post_raw(c, url, answer("w5", {item: {"decision": "allow_once"}}, "r3"))
    assert late.status_code == 422, late.text
    assert late.json()["error"] == "invalid_decisions"
    assert late.json()["message"] == (
        f"{item!r} was cancelled with its run: it can no longer be answered"
    )


def expiring_app(threads: AgUiThreads) -> Starlette:
    route = Route("/ag-ui", ag_ui_endpoint(threads, two_identities), methods=["POST"])
    return Starlette(routes=[route])


async def test_an_answer_to_an_expired_approval_says_it_expired(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Not deleted.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with (
            open_ag_ui_threads(agent, tool_manager=route_tools(), approval_ttl_s=0.0) as threads,
            serve_app(expiring_app(threads)) as base,
            httpx.AsyncClient() as c,
        ):
            url = base + "/ag-ui"
            item = await ask(c, url, "w6")  # expired as soon as it is asked
            late = await post_raw(c, url, answer("w6", {item: {"decision": "allow_once"}}, "r2"))
            thread = await threads.thread("w6", "tester", create=False)
            assert thread is not None
            assert thread.run is not None
            with anyio.fail_after(WAIT_S):  # the expired approval is denied, the run goes on
                while not thread.run.finished:
                    await thread.run.changed().wait()
        history = agent.session("w6").messages  # type: ignore[union-attr]
    assert late.status_code == 422, late.text
    assert late.json()["message"] == (
        f"{item!r} expired unanswered (denied): it can no longer be answered"
    )
    assert_settled_once(history)
    assert "denied" in next(m for m in history if m.get("role") == "tool")["content"]
    assert history[-1]["content"] == "Not deleted."


async def test_an_answer_to_a_timed_out_questionnaire_says_it_expired(tmp_path: Path) -> None:
    manager = route_tools()
    register_builtin_tools(manager, None, names=["questionnaire"])
    questions = {
        "title": "Trip",
        "timeout_seconds": 0.5,
        "questions": [{"id": "city", "kind": "text", "prompt": "Where?"}],
    }
    script = [tool_call("questionnaire", questions), reply("No answer, then.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with (
            open_ag_ui_threads(agent, tool_manager=manager) as threads,
            serve_app(expiring_app(threads)) as base,
            httpx.AsyncClient() as c,
        ):
            url = base + "/ag-ui"
            first = await post_run(c, url, run_input("w7", [ASK]))
            item = customs(first, QUESTIONNAIRE_REQUEST)[0]["id"]
            thread = await threads.thread("w7", "tester", create=False)
            assert thread is not None
            with anyio.fail_after(WAIT_S):  # the questionnaire times out, the run goes on
                while thread.waiting is not None:
                    await thread.changed().wait()
                assert thread.run is not None
                while not thread.run.finished:
                    await thread.run.changed().wait()
            late = await post_raw(c, url, answer("w7", {item: {"answers": {"city": "Rome"}}}, "r2"))
    assert late.status_code == 422, late.text
    assert late.json()["message"] == (
        f"{item!r} expired unanswered (timed out): it can no longer be answered"
    )


async def test_a_waiting_run_survives_a_restart_of_the_serving_process(tmp_path: Path) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url, httpx.AsyncClient() as c:
            item = await ask(c, url, "w4")
        restarted = SAgent(model=model.chat_model())  # a new process on the same data dir
        async with (
            serve_route(restarted, tmp_path, route_tools()) as url,
            httpx.AsyncClient() as c,
        ):
            second = await post_run(c, url, answer("w4", {item: {"decision": "allow_once"}}, "r2"))
    results = [e for e in second if e.type.value == "TOOL_CALL_RESULT"]
    assert len(results) == 1
    assert "deleted a.txt" in results[0].content
    assert second[-1].result == {"sagents": {"reason": "stop"}}


def test_a_script_approval_card_shows_the_script_literally_and_the_description_on_one_line() -> (
    None
):
    """The card's text is the one rendering every channel shows (``ApprovalRequest.view``):
    a bidi override in the script is shown as an escape (what is read is what runs), and a
    description with newlines cannot draw a script line of its own above the real one."""
    from sagents.agent._run import approval_message
    from sagents.tool._approval import ApprovalRequest

    script = "print('safe')  # \u202e ;)(etadpu\nrun()"
    fake = "tidy up\nprint('only this runs')"
    text = approval_message(ApprovalRequest.for_script(("fs__write",), script, description=fake))
    assert "\u202e" not in text
    assert "\\u202e" in text
    assert "print('only this runs')" not in text.splitlines()
    assert text.endswith("run()")  # the whole script, last


async def test_the_asking_stream_and_the_answering_stream_each_start_with_one_state_snapshot(
    tmp_path: Path,
) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        async with serve_route(agent, tmp_path, route_tools()) as url, httpx.AsyncClient() as c:
            first = await post_run(c, url, run_input("w9", [ASK]))
            item = str(customs(first, APPROVAL_REQUEST)[0]["id"])
            second = await post_run(c, url, answer("w9", {item: {"decision": "allow_once"}}, "r2"))
    for events, then in ((first, "TOOL_CALL_START"), (second, "TOOL_CALL_RESULT")):
        kinds = [e.type.value for e in events]
        assert kinds.count("STATE_SNAPSHOT") == 1
        assert kinds.index("STATE_SNAPSHOT") < kinds.index(then)
