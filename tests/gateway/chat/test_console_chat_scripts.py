"""run_script in the console's Chat page (docs/console.md, "Chat"): offered when the gateway
offers it, its one approval asked in the page's approval card before the run (the gateway's
policy step), run on the gateway's script host, and each run audited like any other session's
(one ``gateway_call`` entry in the thread's gateway session)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest

from sagents.audit._store import AUDIT_FILE, SqliteAuditStore, default_data_dir
from sagents.cli._console_chat import CHAT_SESSION_PREFIX
from sagents.gateway._chat._tools import script_session_id
from sagents.testing import reply, tool_call
from tests.gateway.chat.test_console_chat import console_chat, events_of, run_input

ECHO_SCRIPT = "from agent_tools import call\nprint(call('fault__echo', {'text': 'from-chat'}))"
SCRIPT = {"code": ECHO_SCRIPT, "tools": ["fault__echo"], "description": "echo from the chat"}


def answer(thread: str, decisions: dict[str, Any]) -> dict[str, Any]:
    body = run_input(thread, "run it")
    body["runId"] = "r-answer"
    body["forwardedProps"] = {"sagents": {"decisions": decisions}}
    return body


def customs(stream: str, name: str) -> list[dict[str, Any]]:
    return [e["value"] for e in events_of(stream) if e["type"] == "CUSTOM" and e["name"] == name]


def runs_of(thread: str) -> list[Any]:
    """The gateway's ``gateway_call`` audit entries of a chat thread's session."""
    session_id = script_session_id(CHAT_SESSION_PREFIX + thread)
    store = SqliteAuditStore(path=default_data_dir() / AUDIT_FILE)

    async def read() -> list[Any]:
        try:
            return [
                e
                for e in await store.entries(kind="gateway_call", limit=1000)
                if e.session_id == session_id
            ]
        finally:
            store.close()

    return anyio.run(read)


def chat_script_run(tmp_path: Path, thread: str, decision: str) -> tuple[str, str, Any]:
    """A chat turn whose run_script waits for its approval, answered ``decision``: the first
    stream, the answer's stream, the model's first request."""
    script = [tool_call("run_script", SCRIPT), reply("Ran it.")]
    with console_chat(tmp_path, script) as served:
        route = f"{served.base}/console/ag-ui"
        operator = {"Authorization": f"Bearer {served.secret}"}
        first = httpx.post(route, json=run_input(thread, "run it"), headers=operator, timeout=120)
        assert first.status_code == 200, first.text
        (request,) = customs(first.text, "sagents.approval.request")
        decisions = {request["id"]: {"decision": decision}}
        second = httpx.post(route, json=answer(thread, decisions), headers=operator, timeout=120)
        assert second.status_code == 200, second.text
        return first.text, second.text, served.model.requests[0]


def test_the_chat_offers_the_gateways_run_script_and_asks_its_one_approval_in_the_page(
    tmp_path: Path,
) -> None:
    first, second, asked = chat_script_run(tmp_path, "scripted", "allow_once")
    offered = {t["function"]["name"] for t in asked["tools"]}
    assert "run_script" in offered
    (request,) = customs(first, "sagents.approval.request")
    assert request["kind"] == "script"
    assert request["tools"] == ["fault__echo"]
    assert request["script"] == ECHO_SCRIPT  # the whole script, never cut
    assert request["offered"] == ["allow_once", "deny"]  # never for the session
    finished = events_of(first)[-1]
    assert finished["result"] == {"sagents": {"waiting": [request["id"]]}}
    (result,) = [e for e in events_of(second) if e["type"] == "TOOL_CALL_RESULT"]
    assert "from-chat" in result["content"]
    (run,) = runs_of("scripted")
    assert run.tool == "run_script"
    assert run.status == "ok"
    assert json.dumps(run.data).count("fault__echo") >= 1
    assert script_session_id("chat:t") == script_session_id("chat:t")
    assert re.fullmatch(r"[0-9a-f]{32}", script_session_id("chat:../../x"))


def test_a_denied_chat_script_never_runs_and_is_audited_as_rejected(tmp_path: Path) -> None:
    _first, second, _asked = chat_script_run(tmp_path, "denied-script", "deny")
    (result,) = [e for e in events_of(second) if e["type"] == "TOOL_CALL_RESULT"]
    assert "from-chat" not in result["content"]
    assert "did not approve the write tools fault__echo" in result["content"]
    (run,) = runs_of("denied-script")
    assert run.status == "rejected"


def test_idle_chat_threads_give_back_their_script_sandboxes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat thread's script session is released once idle past the gateway's
    ``sessionIdleTimeout`` (docs/gateway.md, "Sessions and workspaces"): after N threads ran a
    script and went idle, the gateway holds no sandbox for any of them."""
    threads = [f"idle-{n}" for n in range(3)]
    script = [step for _ in threads for step in (tool_call("run_script", SCRIPT), reply("Ran."))]
    with console_chat(tmp_path, script, mode="auto", sessionIdleTimeout=1) as served:
        scripts = served.gateway.scripts
        all_released = served.portal.call(anyio.Event)
        release = scripts.release

        async def released_then_count(session_id: str, **options: Any) -> None:
            await release(session_id, **options)
            if not scripts.sandboxes_alive:
                all_released.set()

        monkeypatch.setattr(scripts, "release", released_then_count)
        route = f"{served.base}/console/ag-ui"
        operator = {"Authorization": f"Bearer {served.secret}"}
        for thread in threads:
            sent = httpx.post(
                route, json=run_input(thread, "run it"), headers=operator, timeout=120
            )
            assert sent.status_code == 200, sent.text
            (result,) = [e for e in events_of(sent.text) if e["type"] == "TOOL_CALL_RESULT"]
            assert "from-chat" in result["content"]  # its sandbox ran the script

        async def released() -> None:
            with anyio.fail_after(60):  # within the test's own timeout: a clear failure
                await all_released.wait()

        served.portal.call(released)
        assert scripts.sandboxes_alive == 0
        for thread in threads:
            assert len(runs_of(thread)) == 1  # each thread's run went through the gateway


def test_a_tool_allowed_for_the_threads_session_is_not_asked_about_again_in_its_script(
    tmp_path: Path,
) -> None:
    """A write tool the user allowed "for this session" on a direct call is not asked about
    again when the thread's next run_script lists it: the script's one approval covers only
    the tools the session has not allowed (docs/console.md, "Chat")."""
    thread = "granted-then-script"
    script = [
        tool_call("fault__echo", {"text": "direct"}),
        tool_call("run_script", SCRIPT),
        reply("Ran both."),
    ]
    with console_chat(tmp_path, script) as served:
        route = f"{served.base}/console/ag-ui"
        operator = {"Authorization": f"Bearer {served.secret}"}
        first = httpx.post(route, json=run_input(thread, "run it"), headers=operator, timeout=120)
        assert first.status_code == 200, first.text
        (request,) = customs(first.text, "sagents.approval.request")
        assert request["kind"] != "script"
        assert "allow_session" in request["offered"]
        decisions = {request["id"]: {"decision": "allow_session"}}
        second = httpx.post(route, json=answer(thread, decisions), headers=operator, timeout=120)
        assert second.status_code == 200, second.text
    assert customs(second.text, "sagents.approval.request") == []  # the script was not asked
    results = [e["content"] for e in events_of(second.text) if e["type"] == "TOOL_CALL_RESULT"]
    assert any("direct" in content for content in results)
    assert any("from-chat" in content for content in results)
    (run,) = runs_of(thread)
    assert run.status == "ok"
