"""The console in a real browser (headless Chromium through Selenium), against one gateway
with real sandboxed run_script: runs and their progress, output panes, approvals, background
cancel, audit filters, literal rendering of model-written text, the token login.

One gateway (run in a thread with its own event loop) and one browser serve the whole module.
With ``SAGENTS_CONSOLE_SCREENSHOTS=DIR`` each page is saved as ``DIR/console-<page>.png``
(``scripts/console_screenshots.sh`` writes docs/img/ that way).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import mcp_types as mt
import pytest
from mcp import Client

from sagents.audit._store import default_data_dir
from sagents.gateway._factory import open_gateway
from sagents.gateway._http_server import serve_http
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._runtime import ConfiguredGateway
from sagents.gateway._settings import GatewaySettings
from sagents.gateway.console._live import LiveRuns
from tests.gateway.test_configured import text_of, write_config

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

from tests.browser import CHROMEDRIVER, CHROMIUM, WAIT_S, chromium, wait  # noqa: E402

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs chromium and chromium-driver (scripts/setup.sh --test installs them)",
)

TOKEN = "console-browser-token"
XSS = "<script>alert(1)</script><b>bold</b>\x1b[31m"


class Served:
    """The gateway in its own thread: call coroutines in it with :meth:`run` / :meth:`start`."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, gateway: ConfiguredGateway,
                 base: str) -> None:  # fmt: skip
        self.portal = portal
        self.gateway = gateway
        self.base = base
        self.started: list[Future[Any]] = []

    def start(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future = self.portal.start_task_soon(fn, *args)
        self.started.append(future)
        return future

    def cancel_the_rest(self) -> None:
        """Cancel what a failed test left running (a call waiting for an approval nobody gives
        would hold the portal open until the approval timeout)."""
        for future in self.started:
            future.cancel()

    def live(self) -> LiveRuns:
        hub = self.gateway.hub
        watchers = [w for w in hub._watchers if isinstance(w, LiveRuns)]
        assert watchers, "the console watches the hub"
        return watchers[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console")
    settings = GatewaySettings(
        config=write_config(root),
        mode="ask",
        transport="http",
        port=0,
        workspace=root / "ws",
        bearer_token=TOKEN,
        approvals="console",
        background_after_s=60.0,
    )
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(open_gateway(settings)) as gateway,
    ):
        scope: list[anyio.CancelScope] = []

        async def serve(*, task_status: Any) -> None:
            with anyio.CancelScope() as cancel:
                scope.append(cancel)
                async with anyio.create_task_group() as tg:
                    port = await tg.start(serve_http, gateway, settings)
                    task_status.started(port)

        port = portal.start_task(serve)[1]
        served = Served(portal, gateway, f"http://127.0.0.1:{port}/console")
        try:
            yield served
        finally:
            served.cancel_the_rest()
            portal.call(scope[0].cancel)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium(1200, 800) as driver:
        yield driver


def text(browser: WebDriver, css: str) -> str:
    """The element's text, or "" while it is missing or being replaced by a live update."""
    try:
        found = browser.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""
    except WebDriverException as error:
        # Chromium's form of a stale element: the node was replaced between find and read
        if "does not belong to the document" in str(error):
            return ""
        raise


def shot(browser: WebDriver, name: str) -> None:
    folder = os.environ.get("SAGENTS_CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / f"console-{name}.png"))


def call_tool(served: Served, name: str, arguments: dict[str, Any]) -> Future[mt.CallToolResult]:
    async def call() -> mt.CallToolResult:
        async with Client(served.gateway.server, mode="legacy") as client:
            return await client.call_tool(name, arguments)

    return served.start(call)


def new_run(served: Served, before: set[str]) -> Callable[[WebDriver], Any]:
    def found(_: WebDriver) -> Any:
        fresh = [r for r in served.live().runs.values() if r.script_id not in before]
        return fresh[0] if fresh else False

    return found


def test_without_the_token_the_console_refuses_then_logs_in(
    served: Served, browser: WebDriver
) -> None:
    browser.get(f"{served.base}/runs")
    assert browser.find_elements(By.ID, "token"), "the login form is shown"
    assert not browser.find_elements(By.ID, "runs")
    shot(browser, "login")
    browser.find_element(By.ID, "token").send_keys("wrong")
    browser.find_element(By.ID, "login-submit").click()
    assert "not valid" in wait(browser, lambda b: text(b, "#login-error"))
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "login-submit").click()
    wait(browser, lambda b: b.find_elements(By.ID, "runs"))
    cookies = {c["name"]: c for c in browser.get_cookies()}
    assert cookies["sagents_console"]["httpOnly"] is True
    assert cookies["sagents_console"]["sameSite"] == "Strict"


STEPPED = """
import os, sys, time
from agent_tools import call, progress
for step in (1, 2, 3):
    call("fault__add", {"a": step, "b": 1})
    progress(step, 3, f"step {step}")
    print(f"out {step}", flush=True)
    print(f"err {step}", file=sys.stderr, flush=True)
    while not os.path.exists(f"go{step}"):
        time.sleep(0.02)
print("done")
"""


def test_a_run_appears_its_bar_moves_and_stdout_and_stderr_have_panes(
    served: Served, browser: WebDriver
) -> None:
    browser.get(f"{served.base}/runs")
    before = set(served.live().runs)
    result = call_tool(
        served, "run_script", {"code": STEPPED, "tools": [], "description": "three steps"}
    )
    run = wait(browser, new_run(served, before))
    workspace = served.gateway.workspaces.path_for(run.session_id)
    row = f'tr[data-script-id="{run.script_id}"]'

    def bar(attribute: str) -> Callable[[WebDriver], Any]:
        def read(b: WebDriver) -> Any:  # looked up each time: the row may be redrawn
            found = b.find_elements(By.CSS_SELECTOR, f"{row} progress")
            return found[0].get_attribute(attribute) if found else None

        return read

    wait(browser, lambda b: bar("value")(b) == "1")
    assert bar("max")(browser) == "3"
    shot(browser, "runs")
    (workspace / "go1").touch()
    wait(browser, lambda b: bar("value")(b) == "2")
    browser.get(f"{served.base}/runs/{run.script_id}")
    browser.execute_script("window.sagentsMark = 'this document'")
    wait(browser, lambda b: "out 2" in text(b, "#pane-stdout"))
    assert "err 2" in text(browser, "#pane-stderr")
    assert "out" not in text(browser, "#pane-stderr")
    assert "three steps" in text(browser, "#description")
    (workspace / "go2").touch()
    wait(browser, lambda b: "out 3" in text(b, "#pane-stdout"))
    assert "err 3" in text(browser, "#pane-stderr")
    shot(browser, "run-live")
    (workspace / "go3").touch()
    outcome = result.result(timeout=WAIT_S)
    assert outcome.is_error is False, text_of(outcome)
    wait(browser, lambda b: text(b, "#status") == "ok" and "done" in text(b, "#output"))
    assert text(browser, "#exit-code") == "0"
    assert "fault__add" in text(browser, "#calls-table")
    assert browser.execute_script("return window.sagentsMark") == "this document"  # no reload
    shot(browser, "run")


ECHO = "from agent_tools import call\nprint(call('fault__echo', {'text': 'hello from echo'}))\n"


def first_card(browser: WebDriver) -> dict[str, str]:
    """The first card's text, its buttons' and its arguments' (waits for one; a live update may
    swap the page's content between two reads, so all are read in one go, again if it did)."""

    def read(b: WebDriver) -> dict[str, str] | None:
        cards = b.find_elements(By.CSS_SELECTOR, "article.card")
        if not cards:
            return None
        arguments = cards[0].find_elements(By.CSS_SELECTOR, "pre.arguments")
        return {
            "text": cards[0].text,
            "buttons": " ".join(e.text for e in cards[0].find_elements(By.TAG_NAME, "button")),
            "arguments": arguments[0].text if arguments else "",
            "bold": str(bool(cards[0].find_elements(By.CSS_SELECTOR, "pre.arguments b"))),
        }

    return wait(browser, read)  # type: ignore[no-any-return]


def click_first_card(browser: WebDriver, button: str) -> None:
    def click(b: WebDriver) -> bool:
        cards = b.find_elements(By.CSS_SELECTOR, "article.card")
        if not cards:
            return False
        cards[0].find_element(By.CSS_SELECTOR, f"button.{button}").click()
        return True

    wait(browser, click)


def approve_card(browser: WebDriver, served: Served, button: str) -> dict[str, str]:
    browser.get(f"{served.base}/approvals")
    seen = first_card(browser)
    click_first_card(browser, button)
    wait(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, "article.card"))
    return seen


def test_allow_once_on_a_script_card_lets_the_script_run(
    served: Served, browser: WebDriver
) -> None:
    result = call_tool(
        served, "run_script", {"code": ECHO, "tools": ["fault__echo"], "description": "echo it"}
    )
    browser.get(f"{served.base}/approvals")
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "article.card"))
    shot(browser, "approvals")
    seen = approve_card(browser, served, "allow")
    assert "fault__echo" in seen["text"]
    assert "write" in seen["text"]
    assert "print(call('fault__echo'" in seen["text"]  # the script, literally
    assert "Allow for this session" not in seen["buttons"]  # never for a script
    outcome = result.result(timeout=WAIT_S)
    assert outcome.is_error is False, text_of(outcome)
    assert "hello from echo" in text_of(outcome)


def test_deny_on_a_script_card_gives_the_run_its_refusal(
    served: Served, browser: WebDriver
) -> None:
    result = call_tool(
        served, "run_script", {"code": ECHO, "tools": ["fault__echo"], "description": "echo"}
    )
    approve_card(browser, served, "deny")
    outcome = result.result(timeout=WAIT_S)
    assert outcome.is_error is True
    assert "did not approve" in text_of(outcome)
    assert "hello from echo" not in text_of(outcome)


def test_a_direct_write_call_can_be_allowed_for_this_session(
    served: Served, browser: WebDriver
) -> None:
    async def twice() -> list[mt.CallToolResult]:
        async with Client(served.gateway.server, mode="legacy") as client:
            first = await client.call_tool("fault__echo", {"text": XSS})
            second = await client.call_tool("fault__echo", {"text": "again"})
            return [first, second]

    results = served.start(twice)
    browser.get(f"{served.base}/approvals")
    card = first_card(browser)
    assert "<script>alert(1)</script><b>bold</b>\\u001b[31m" in card["arguments"]  # JSON, literally
    assert card["bold"] == "False"
    click_first_card(browser, "allow-session")
    first, second = results.result(timeout=WAIT_S)
    assert first.is_error is False
    assert text_of(second) == "again"  # not asked again in this session
    assert served.gateway.pending.pending() == []


def test_a_page_opened_right_after_an_answer_was_sent_loads(
    served: Served, browser: WebDriver
) -> None:
    """An answer is a form's submission (a navigation): a page opened once the gateway has
    the answer, while the page the answer brings back may still be loading, must load too. A
    ``beforeunload`` handler on the console's pages left that navigation waiting in Chromium,
    never sent, until its page load timeout."""
    for step in range(5):
        result = call_tool(served, "fault__echo", {"text": f"left at once {step}"})
        browser.get(f"{served.base}/approvals")
        first_card(browser)
        click_first_card(browser, "deny")
        assert result.result(timeout=WAIT_S).is_error is True  # the gateway has the answer
        browser.get(f"{served.base}/approvals")  # at once
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "p.empty"))


def test_the_approvals_page_shows_a_new_card_in_place_without_reloading(
    served: Served, browser: WebDriver
) -> None:
    browser.get(f"{served.base}/approvals")
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "p.empty"))
    browser.execute_script("window.sagentsMark = 'this document'")
    result = call_tool(served, "fault__echo", {"text": "in place"})  # a new session: asked
    card = first_card(browser)
    assert "fault__echo" in card["text"]
    assert browser.execute_script("return window.sagentsMark") == "this document"
    click_first_card(browser, "deny")
    outcome = result.result(timeout=WAIT_S)
    assert outcome.is_error is True
    assert "was not approved" in text_of(outcome)


def test_model_written_text_renders_literally_in_runs_and_run_pages(
    served: Served, browser: WebDriver
) -> None:
    code = f"print({XSS!r})\nprint('<img src=x onerror=alert(2)>')\n"
    before = set(served.live().runs)
    outcome = call_tool(
        served, "run_script", {"code": code, "tools": [], "description": XSS}
    ).result(timeout=WAIT_S)
    assert outcome.is_error is False, text_of(outcome)
    run = wait(browser, new_run(served, before))
    browser.get(f"{served.base}/runs/{run.script_id}")
    assert text(browser, "#description") == "<script>alert(1)</script><b>bold</b>\\x1b[31m"
    assert not browser.find_elements(By.CSS_SELECTOR, "#description b, #output img, main script")
    assert "<img src=x onerror=alert(2)>" in text(browser, "#output")
    assert "\\x1b[31m" in text(browser, "#output")
    browser.get(f"{served.base}/runs")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-script-id="{run.script_id}"]')
    assert not row.find_elements(By.TAG_NAME, "b")
    assert browser.execute_script("return document.querySelectorAll('main script').length") == 0


def test_cancel_from_the_background_page_ends_a_background_call(
    served: Served, browser: WebDriver
) -> None:
    served.gateway.background_after_s = 0.2  # read at each call: this one is handed off
    try:
        handle = call_tool(served, "fault__hang", {}).result(timeout=WAIT_S)
    finally:
        served.gateway.background_after_s = 60.0
    assert "script_status" in text_of(handle) or "background" in text_of(handle)
    browser.get(f"{served.base}/background")
    button = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "button.cancel"))[0]
    shot(browser, "background")
    button.click()
    wait(browser, lambda b: "cancelled" in text(b, "#background"))
    assert not browser.find_elements(By.CSS_SELECTOR, "button.cancel")
    assert all(t.status != "running" for t in served.gateway.tasks.live.list_all())


def test_the_audit_page_filters_by_status_and_description(
    served: Served, browser: WebDriver
) -> None:
    browser.get(f"{served.base}/audit")
    wait(browser, lambda b: "three steps" in text(b, "#audit"))
    shot(browser, "audit")
    browser.find_element(By.CSS_SELECTOR, '#f-status option[value="rejected"]').click()
    browser.find_element(By.ID, "f-apply").click()
    wait(browser, lambda b: "status=rejected" in b.current_url)
    statuses = {e.text for e in browser.find_elements(By.CSS_SELECTOR, "#audit td.status")}
    assert statuses == {"rejected"}
    browser.get(f"{served.base}/audit?q=THREE")
    descriptions = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#audit .description")]
    assert descriptions == ["three steps"]


def test_the_navigation_count_of_approvals_follows_requests_live_on_a_page_without_them(
    served: Served, browser: WebDriver
) -> None:
    browser.get(f"{served.base}/todo")
    wait(browser, lambda b: b.find_elements(By.TAG_NAME, "h1"))
    browser.execute_script("window.sagentsMark = 'this document'")
    assert text(browser, "#nav-pending") == ""  # nothing waits: no count
    result = call_tool(served, "fault__echo", {"text": "counted"})  # a new session: asked
    wait(browser, lambda b: text(b, "#nav-pending") == "1")
    pending = served.gateway.pending
    (waiting,) = served.portal.call(lambda: pending.pending())
    assert served.portal.call(lambda: pending.answer(waiting.approval_id, "deny", by=None))
    wait(browser, lambda b: not b.find_elements(By.ID, "nav-pending"))
    assert browser.execute_script("return window.sagentsMark") == "this document"  # no reload
    assert result.result(timeout=WAIT_S).is_error is True


def test_the_todo_page_says_when_there_is_no_list(served: Served, browser: WebDriver) -> None:
    browser.get(f"{served.base}/todo")
    wait(browser, lambda b: b.find_elements(By.TAG_NAME, "h1"))
    assert text(browser, "h1") == "Todo"
    shot(browser, "todo")


def test_the_printed_login_url_logs_the_browser_in_and_leaves_the_address_bar(
    served: Served, browser: WebDriver
) -> None:
    browser.delete_all_cookies()
    browser.get(f"{served.base}/approvals")
    assert browser.find_elements(By.ID, "token"), "without a login the console is nobody's"
    secret = OperatorSecret.load_or_create(default_data_dir())
    browser.get(secret.login_url(f"{served.base}/"))  # the URL `sagents serve` prints
    wait(browser, lambda b: b.find_elements(By.ID, "runs"))
    assert browser.current_url == f"{served.base}/runs"  # the token left the address bar
    assert "operator" in text(browser, ".who")
    browser.get(f"{served.base}/approvals")
    assert not browser.find_elements(By.ID, "token")
