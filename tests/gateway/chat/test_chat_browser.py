"""``sagents chat --web``'s page in headless Chromium (Selenium), against the scripted model:
live stdout and stderr panes that fill while the tool runs and fold when it ends, an approval
answered in the page, Stop cancelling a running tool (the history stays valid), model text and
tool output kept as text, a reload showing the conversation; and the HTTP rules (login, CSRF,
headers).

With ``SAGENTS_CHAT_SCREENSHOTS=DIR`` the page is saved as ``DIR/chat-<name>.png``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx2 as httpx
import pytest

from sagents.agent import SAgent
from sagents.cli._chat_web import serve_chat_web
from sagents.gateway._settings import GatewaySettings
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import emit_tool_progress
from sagents.tool.tool_base import tool
from sagents.tool.tool_manager import ToolManager
from tests.agent.ag_ui_helpers import delete_file, wait_forever

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

from tests.browser import CHROMEDRIVER, CHROMIUM, chromium, wait  # noqa: E402

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs chromium and chromium-driver (scripts/setup.sh --test installs them)",
)
MARKUP = "<b>bold</b><img src=x onerror=alert(1)>"


class Gate:
    """Lets a test hold a tool open until it has seen what it wants."""

    def __init__(self) -> None:
        self.event = anyio.Event()


def tools_with(gate: Gate) -> Callable[[ToolManager], object]:
    @tool(permission="read_only")
    async def build(target: str) -> str:
        """Build, printing on stdout and stderr until released.

        Args:
            target: What to build.
        """
        await emit_tool_progress(f"compiling {target} {MARKUP}\n", stream="stdout")
        await emit_tool_progress("warning: slow disk\n", stream="stderr")
        await gate.event.wait()  # the test saw both panes fill while the tool runs
        await emit_tool_progress("linking\n", stream="stdout")
        return f"built {target}"

    def register(manager: ToolManager) -> None:
        for fn in (build, delete_file, wait_forever):
            manager.register_tool(fn)

    return register


@contextmanager
def chat_web(tmp_path: Path, script: list[ScriptedReply]) -> Iterator[tuple[str, Gate, Any]]:
    """The chat page served on 127.0.0.1 against ``script``; yields the login URL."""
    gate = Gate()
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(ScriptedModel(script)) as model,
    ):
        settings = GatewaySettings(transport="http", host="127.0.0.1", port=0)
        agent = SAgent(model=model.chat_model())
        scope: list[anyio.CancelScope] = []

        async def serve(*, task_status: Any) -> None:
            with anyio.CancelScope() as cancel:
                scope.append(cancel)
                async with anyio.create_task_group() as tg:
                    url = await tg.start(
                        lambda task_status: serve_chat_web(
                            agent, None, None, "ask", settings, tmp_path,
                            register=tools_with(gate), task_status=task_status,
                        )
                    )  # fmt: skip
                    task_status.started(url)

        url = portal.start_task(serve)[1]
        try:
            yield url, gate, portal
        finally:
            portal.call(scope[0].cancel)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium(1200, 900) as driver:
        yield driver


def text(browser: WebDriver, css: str) -> str:
    found = browser.find_elements(By.CSS_SELECTOR, css)
    return str(found[0].get_attribute("textContent") or "") if found else ""


def shot(browser: WebDriver, name: str) -> None:
    folder = os.environ.get("SAGENTS_CHAT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / f"chat-{name}.png"))


def open_chat(browser: WebDriver, login_url: str) -> None:
    browser.get(login_url)
    wait(browser, lambda b: b.find_elements(By.ID, "composer"))
    browser.execute_script("localStorage.clear()")  # a new thread for each test
    browser.refresh()
    wait(browser, lambda b: b.find_elements(By.ID, "composer"))


def say(browser: WebDriver, message: str) -> None:
    box = browser.find_element(By.ID, "message")
    box.clear()
    box.send_keys(message)
    browser.find_element(By.ID, "send").click()


def test_both_panes_fill_while_the_tool_runs_and_fold_when_it_ends(
    browser: WebDriver, tmp_path: Path
) -> None:
    script = [tool_call("build", {"target": "app"}), reply(f"Built. {MARKUP}")]
    with chat_web(tmp_path, script) as (url, gate, portal):
        open_chat(browser, url)
        say(browser, "build the app")
        wait(browser, lambda b: "compiling app" in text(b, ".tool .pane-stdout pre"))
        wait(browser, lambda b: "warning: slow disk" in text(b, ".tool .pane-stderr pre"))
        card = browser.find_element(By.CSS_SELECTOR, ".tool")
        assert "closed" not in (card.get_attribute("class") or "")  # still running
        assert card.find_element(By.CSS_SELECTOR, ".pane-stdout").is_displayed()
        shot(browser, "live-panes")
        portal.call(gate.event.set)
        wait(browser, lambda b: "built app" in text(b, ".tool .result"))
        wait(browser, lambda b: "closed" in (card.get_attribute("class") or ""))
        assert not card.find_element(By.CSS_SELECTOR, ".pane-stdout").is_displayed()
        wait(browser, lambda b: "Built." in text(b, ".msg.assistant .text"))
        # markup from the model and from the tool stays text
        assert MARKUP in text(browser, ".msg.assistant .text")
        assert MARKUP in text(browser, ".tool .pane-stdout pre")
        conversation = browser.find_element(By.ID, "conversation")
        assert not conversation.find_elements(By.CSS_SELECTOR, "b, img")
        # a reload shows the conversation, from the server
        browser.refresh()
        wait(browser, lambda b: "built app" in text(b, ".tool .result"))
        assert text(browser, ".msg.user .text") == "build the app"
        assert MARKUP in text(browser, ".msg.assistant .text")
        assert not browser.find_element(By.ID, "conversation").find_elements(By.CSS_SELECTOR, "b")
        shot(browser, "reloaded")


def test_an_approval_answered_in_the_page_lets_the_call_run(
    browser: WebDriver, tmp_path: Path
) -> None:
    script = [tool_call("delete_file", {"path": "a.txt"}), reply("Deleted.")]
    with chat_web(tmp_path, script) as (url, _gate, _portal):
        open_chat(browser, url)
        say(browser, "delete a.txt")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".approval .decide-allow_once"))
        assert '"path": "a.txt"' in text(browser, ".approval .request")
        shot(browser, "approval")
        browser.find_element(By.CSS_SELECTOR, ".approval .decide-allow_once").click()
        wait(browser, lambda b: "deleted a.txt" in text(b, ".tool .result"))
        wait(browser, lambda b: "Deleted." in text(b, ".msg.assistant .text"))


def test_stop_cancels_a_running_tool_and_the_history_stays_valid(
    browser: WebDriver, tmp_path: Path
) -> None:
    script = [tool_call("wait_forever", {"seconds": 3600}), reply("Still here.")]
    with chat_web(tmp_path, script) as (url, _gate, _portal):
        open_chat(browser, url)
        say(browser, "wait")
        wait(browser, lambda b: "waiting" in text(b, ".tool .pane-stdout pre"))
        browser.find_element(By.ID, "stop").click()
        wait(browser, lambda b: text(b, "#status") == "stopped")
        say(browser, "and now?")
        wait(browser, lambda b: "Still here." in text(b, "#conversation"))
        wait(browser, lambda b: "cancelled" in text(b, ".tool .result"))


def test_the_page_and_the_route_need_a_login_and_the_csrf_token(tmp_path: Path) -> None:
    with chat_web(tmp_path, [reply("hi")]) as (url, _gate, _portal):
        base = url.split("?")[0]
        page = httpx.get(base)
        assert page.status_code == 401  # the login page, for anyone who only reaches the port
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "'unsafe-inline'" not in page.headers["content-security-policy"]
        body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user",
                                                               "content": "hi"}]}  # fmt: skip
        assert httpx.post(base + "ag-ui", json=body).status_code == 401
        with httpx.Client() as client:
            logged = client.get(url, follow_redirects=True)
            assert logged.status_code == 200
            assert "HttpOnly" in logged.history[0].headers["set-cookie"]
            no_csrf = client.post(base + "ag-ui", json=body)
            assert no_csrf.status_code == 401
            evil = client.post(base + "ag-ui", json=body, headers={"Origin": "http://evil.test"})
            assert evil.status_code == 403
            assert client.get(base, headers={"Host": "evil.test"}).status_code == 421
