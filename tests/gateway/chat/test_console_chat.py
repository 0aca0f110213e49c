"""The console's Chat page (docs/console.md, "Chat"): ``sagents serve --transport http`` with an
``agent`` section serves ``/console/chat`` and ``/console/ag-ui`` with the console's login,
CSRF, ``Origin`` and ``Host`` rules; each login chats with the tools its token is offered, and
never sees another login's threads. In headless Chromium: the page's approval card lets a call
of the gateway's upstream server run, and the model's markdown is rendered safely.

With ``SAGENTS_CHAT_SCREENSHOTS=DIR`` the page is saved as ``DIR/chat-console.png``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx2 as httpx
import pytest

from sagents.audit._store import default_data_dir
from sagents.cli._console_chat import open_console_chat
from sagents.config._loader import load_config
from sagents.core._permissions import PermissionMode
from sagents.errors import ConfigError
from sagents.gateway._factory import open_gateway
from sagents.gateway._http_server import serve_http
from sagents.gateway._operator_secret import OPERATOR_SECRET_FILE, OperatorSecret
from sagents.gateway._settings import GatewaySettings, load_profiles
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from tests.gateway.test_configured import write_config

OPS_TOKEN = "ops-profile-token-1"
AGENT = {"model": "openai:scripted", "system": "You help the operator."}


@dataclass
class Served:
    base: str  # http://127.0.0.1:PORT
    secret: str
    model: ScriptedModel
    gateway: Any = None  # the served ConfiguredGateway
    portal: Any = None  # the portal its tasks run in

    def login_url(self) -> str:
        return f"{self.base}/console/?token={self.secret}"


@contextmanager
def console_chat(
    root: Path, script: list[ScriptedReply], mode: PermissionMode = "ask", **extra: Any
) -> Iterator[Served]:
    """``sagents serve --transport http``'s app over the test config (the fault and spare
    servers, an ``agent`` section unless ``extra`` says otherwise), its chat model ``script``."""
    config = write_config(root, **({"agent": AGENT} | extra))
    profiles = load_profiles(config)
    settings = GatewaySettings(
        config=config,
        mode=mode,
        transport="http",
        port=0,
        workspace=root / "ws",
        token_profiles={OPS_TOKEN: profiles["ops"]} if "ops" in profiles else {},
    )
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel(script)) as model,
        portal.wrap_async_context_manager(open_gateway(settings)) as gateway,
        portal.wrap_async_context_manager(
            open_console_chat(gateway, settings, model=model.chat_model())
        ) as chat,
    ):
        scope: list[anyio.CancelScope] = []

        async def serve(*, task_status: Any) -> None:
            with anyio.CancelScope() as cancel:
                scope.append(cancel)
                async with anyio.create_task_group() as tg:
                    port = await tg.start(partial(serve_http, chat=chat), gateway, settings)
                    task_status.started(port)

        port = portal.start_task(serve)[1]
        secret = OperatorSecret.load_or_create(default_data_dir()).value
        try:
            yield Served(f"http://127.0.0.1:{port}", secret, model, gateway, portal)
        finally:
            portal.call(scope[0].cancel)


def run_input(thread: str, text: str) -> dict[str, Any]:
    message = {"id": f"m-{thread}-{text}", "role": "user", "content": text}
    return {"threadId": thread, "runId": f"r-{text}", "messages": [message], "tools": [],
            "context": [], "state": {}, "forwardedProps": {}}  # fmt: skip


def events_of(stream: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert found is not None, html[:500]
    return found.group(1)


def test_the_chat_page_and_its_route_need_the_console_login_and_csrf_token(
    tmp_path: Path,
) -> None:
    with console_chat(tmp_path, [reply("hi")]) as served:
        page = httpx.get(f"{served.base}/console/chat")
        assert page.status_code == 401  # the console's login page
        assert "script-src 'self'" in page.headers["content-security-policy"]
        route = f"{served.base}/console/ag-ui"
        assert httpx.post(route, json=run_input("t", "hi")).status_code == 401
        with httpx.Client() as browser:
            logged = browser.get(served.login_url(), follow_redirects=True)
            assert logged.status_code == 200
            chat = browser.get(f"{served.base}/console/chat")
            assert chat.status_code == 200
            assert 'href="/console/chat"' in chat.text  # the navigation's Chat link
            assert 'data-endpoint="/console/ag-ui"' in chat.text
            assert browser.get(f"{served.base}/console/chat/static/chat.js").status_code == 200
            assert browser.post(route, json=run_input("t", "hi")).status_code == 401  # no CSRF
            token = {"X-CSRF-Token": csrf_of(chat.text)}
            evil = browser.post(
                route, json=run_input("t", "hi"), headers={**token, "Origin": "http://evil.test"}
            )
            assert evil.status_code == 403
            assert browser.get(f"{served.base}/console/chat", headers={"Host": "evil.test"}
                               ).status_code == 421  # fmt: skip
            answered = browser.post(route, json=run_input("t", "hi"), headers=token)
            assert answered.status_code == 200
            kinds = [event["type"] for event in events_of(answered.text)]
            assert kinds[0] == "RUN_STARTED"
            assert kinds[-1] == "RUN_FINISHED"


def test_each_login_chats_with_its_own_tools_and_never_sees_another_logins_thread(
    tmp_path: Path,
) -> None:
    script = [reply("operator's answer"), reply("ops answer")]
    with console_chat(tmp_path, script) as served:
        route = f"{served.base}/console/ag-ui"
        operator = {"Authorization": f"Bearer {served.secret}"}
        ops = {"Authorization": f"Bearer {OPS_TOKEN}"}
        first = httpx.post(route, json=run_input("op-thread", "hello"), headers=operator)
        assert first.status_code == 200
        operator_tools = {t["function"]["name"] for t in served.model.requests[-1]["tools"]}
        assert {"fault__echo", "spare__echo"} <= operator_tools
        # the ops profile's token: not the operator's thread, by the route or the page's reader
        taken = httpx.post(route, json=run_input("op-thread", "mine now"), headers=ops)
        assert taken.status_code == 404
        seen = httpx.get(
            f"{served.base}/console/chat/conversation?thread=op-thread", headers=ops
        ).json()
        assert seen["messages"] == []
        mine = httpx.get(
            f"{served.base}/console/chat/conversation?thread=op-thread", headers=operator
        ).json()
        assert [m["content"] for m in mine["messages"]] == ["hello", "operator's answer"]
        # its own thread runs with the ops profile's tools only (servers: ["spare"])
        own = httpx.post(route, json=run_input("ops-thread", "hello"), headers=ops)
        assert own.status_code == 200
        ops_tools = {t["function"]["name"] for t in served.model.requests[-1]["tools"]}
        assert ops_tools
        assert all(not name.startswith("fault__") for name in ops_tools)
        assert "spare__echo" in ops_tools


def test_without_an_agent_section_the_console_has_no_chat_page(tmp_path: Path) -> None:
    with console_chat(tmp_path, [], agent=None) as served, httpx.Client() as browser:
        runs = browser.get(served.login_url(), follow_redirects=True)
        assert runs.status_code == 200
        assert 'href="/console/chat"' not in runs.text
        assert browser.get(f"{served.base}/console/chat").status_code == 404
        route = f"{served.base}/console/ag-ui"
        headers = {"Authorization": f"Bearer {served.secret}"}
        assert httpx.post(route, json=run_input("t", "hi"), headers=headers).status_code == 404


def test_a_bad_agent_section_names_the_key(tmp_path: Path) -> None:
    for section, key in (({}, "agent.model"), ({"model": "m", "sytem": "x"}, "agent.sytem"),
                         ({"model": ""}, "agent.model"), ("openai:x", "agent")):  # fmt: skip
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"mcpServers": {}, "agent": section}), encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert caught.value.details["key"] == key
        assert caught.value.details["file"] == str(path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"mcpServers": {}, "agent": AGENT}), encoding="utf-8")
    loaded = load_config(good).agent
    assert loaded is not None
    assert (loaded.model, loaded.system) == (AGENT["model"], AGENT["system"])


@pytest.mark.anyio
async def test_sagents_serve_serves_the_chat_of_its_agent_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command itself: ``agent.model`` is resolved as ``sagents chat --model`` resolves it
    (here Chat Completions at ``OPENAI_BASE_URL``, the scripted model), the start says where
    the chat is, and a machine with the operator secret chats through ``/console/ag-ui``."""
    from tests.gateway.test_serve_cli import CODE, ROOT, read_stderr_until

    data = tmp_path / "data"
    monkeypatch.delenv("SAGENTS_GATEWAY_TOKEN", raising=False)
    config = write_config(tmp_path, agent=AGENT)
    command = [sys.executable, "-c", CODE, "serve", "--transport", "http", "--port", "0",
               "--config", str(config)]  # fmt: skip
    async with ScriptedModel([reply("From the **served** agent.")]) as model:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SAGENTS_DATA_DIR": str(data),
               "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "scripted"}  # fmt: skip
        with anyio.fail_after(120):
            async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
                line = await read_stderr_until(process, b"chat at ")
                page = line.split("chat at ", 1)[1].split(" ", 1)[0]
                secret = (data / OPERATOR_SECRET_FILE).read_text().strip()
                async with httpx.AsyncClient(timeout=60) as client:
                    answer = await client.post(
                        page.removesuffix("/chat") + "/ag-ui",
                        json=run_input("served", "hello"),
                        headers={"Authorization": f"Bearer {secret}"},
                    )
                process.send_signal(signal.SIGINT)
                code = await process.wait()
    assert page.endswith("/console/chat")
    assert answer.status_code == 200
    texts = [e["delta"] for e in events_of(answer.text) if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(texts) == "From the **served** agent."
    assert model.requests[0]["messages"][0] == {
        "role": "system",
        "content": AGENT["system"],
    }
    assert code in (0, 130)


def test_sagents_serve_stops_at_start_when_the_agent_model_cannot_be_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from sagents.cli.main import app

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "SAGENTS_GATEWAY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    config = write_config(tmp_path, agent={"model": "openai:gpt-4.1-mini"})
    result = CliRunner().invoke(
        app, ["serve", "--transport", "http", "--port", "0", "--config", str(config)]
    )
    assert result.exit_code == 2
    assert "agent.model" in result.output


def test_the_chat_shows_the_task_list_the_gateways_todo_tool_keeps(tmp_path: Path) -> None:
    items = [{"id": "1", "content": "check <the> fleet", "status": "in_progress"}]
    script = [tool_call("todo_write", {"items": items}), reply("Noted.")]
    builtins = {"enabled": ["todo_write"]}
    with console_chat(tmp_path, script, mode="auto", builtinTools=builtins) as served:
        operator = {"Authorization": f"Bearer {served.secret}"}
        answer = httpx.post(
            f"{served.base}/console/ag-ui", json=run_input("todo", "plan"), headers=operator
        )
        state = httpx.get(
            f"{served.base}/console/chat/conversation?thread=todo", headers=operator
        ).json()["state"]
    (delta,) = [e["delta"] for e in events_of(answer.text) if e["type"] == "STATE_DELTA"]
    assert delta[0]["path"] == "/todo"
    assert delta[0]["value"][0]["content"] == "check <the> fleet"
    assert [item["content"] for item in state["todo"]] == ["check <the> fleet"]


def test_a_profiles_login_loads_only_the_skills_of_its_profile(tmp_path: Path) -> None:
    script = [tool_call("load_skill", {"name": "other"}), reply("no"),
              tool_call("load_skill", {"name": "triage"}), reply("yes")]  # fmt: skip
    with console_chat(tmp_path, script) as served:
        ops = {"Authorization": f"Bearer {OPS_TOKEN}"}
        route = f"{served.base}/console/ag-ui"
        refused = httpx.post(route, json=run_input("ops-skills", "other"), headers=ops)
        loaded = httpx.post(route, json=run_input("ops-skills", "triage"), headers=ops)
    (outside,) = [e for e in events_of(refused.text) if e["type"] == "TOOL_CALL_RESULT"]
    assert "# Skill: other" not in outside["content"]
    assert "other" in outside["content"]  # the error names it
    (inside,) = [e for e in events_of(loaded.text) if e["type"] == "TOOL_CALL_RESULT"]
    assert "# Skill: triage" in inside["content"]


def test_the_chat_calls_a_reference_mcp_server_through_the_gateway(tmp_path: Path) -> None:
    """``mcp-server-time`` from PyPI (the test peers), served by the gateway, called by the
    chat's agent."""
    from tests.mcp.helpers import PEER_BIN

    time_server = {"command": str(PEER_BIN / "mcp-server-time"),
                   "args": ["--local-timezone", "UTC"]}  # fmt: skip
    script = [tool_call("time__get_current_time", {"timezone": "Europe/Paris"}), reply("Done.")]
    with console_chat(
        tmp_path, script, mode="auto", mcpServers={"time": time_server}, profiles={}
    ) as served:
        answer = httpx.post(
            f"{served.base}/console/ag-ui",
            json=run_input("time", "what time is it in Paris?"),
            headers={"Authorization": f"Bearer {served.secret}"},
            timeout=60,
        )
    (result,) = [e for e in events_of(answer.text) if e["type"] == "TOOL_CALL_RESULT"]
    assert '"timezone": "Europe/Paris"' in result["content"]
    assert "datetime" in result["content"]
