"""``sagents chat --web``'s page in headless Chromium (Selenium), against the scripted model:
live stdout and stderr panes that fill while the tool runs and fold when it ends, an approval
answered in the page, Stop cancelling a running tool (the history stays valid), markup in model
text and tool output kept as text and the model's markdown rendered safely, a questionnaire
form, the side panel's task list and skills, a script progress bar, a reload showing the
conversation; the HTTP rules (login, CSRF, headers); and the console's Chat page, the same
page served by ``sagents serve``.

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
from sagents.core.events import ScriptProgressEvent
from sagents.gateway._settings import GatewaySettings
from sagents.progress._binding import current_tool_call
from sagents.skill import SkillManager, SkillProxy
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import emit_tool_progress
from sagents.tool.impl import register_builtin_tools
from sagents.tool.tool_base import tool
from sagents.tool.tool_manager import ToolManager
from tests.agent.ag_ui_helpers import delete_file, wait_forever
from tests.gateway.chat.test_console_chat import console_chat

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

from tests.browser import CHROMEDRIVER, CHROMIUM, chromium, wait  # noqa: E402

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs chromium and chromium-driver (scripts/setup.sh --test installs them)",
)
MARKUP = "<b>bold</b><img src=x onerror=alert(1)>"
SKILLS = Path(__file__).parents[1] / "fixtures" / "skills"


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

    @tool(permission="read_only")
    async def crunch(items: int) -> str:
        """Crunch items, reporting progress as run_script does, until released.

        Args:
            items: How many.
        """
        call = current_tool_call()
        assert call is not None

        def report(done: int, status: Any) -> None:
            event = ScriptProgressEvent(
                script_id="run-1", tool_call_id=call.tool_call_id, calls=done, failures=0,
                done=done, total=items, message=f"{done} of {items}", status=status, ts=0.0,
            )  # fmt: skip
            call.hub.publish(call.session_id, event)

        report(3, "running")
        await gate.event.wait()
        report(items, "ok")
        return f"crunched {items}"

    def register(manager: ToolManager) -> None:
        for fn in (build, crunch, delete_file, wait_forever):
            manager.register_tool(fn)
        register_builtin_tools(manager, None, names=["todo_write"])

    return register


@contextmanager
def chat_web(
    tmp_path: Path, script: list[ScriptedReply], skills: SkillProxy | None = None
) -> Iterator[tuple[str, Gate, Any]]:
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
                            agent, None, skills, "ask", settings, tmp_path,
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


def open_console_chat(browser: WebDriver, login_url: str) -> None:
    """Log in to the console and open its Chat page on a new thread."""
    browser.get(login_url)
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "header nav"))
    browser.find_element(By.LINK_TEXT, "Chat").click()
    wait(browser, lambda b: b.find_elements(By.ID, "composer"))
    browser.execute_script("localStorage.clear()")
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


HOSTILE_MARKDOWN = "\n".join(
    [
        "# Plan",
        "",
        "**bold** and *em* and `<img src=x onerror=window.pwned=1>`",
        "",
        "- [docs](https://example.org/docs)",
        "- [evil](javascript:window.pwned=1)",
        "- [evil2](JaVaScRiPt:window.pwned=1)",
        "- [data](data:text/html;base64,PHNjcmlwdD4=)",
        "",
        "> quoted **<b>not a bold tag</b>**",
        "",
        "```",
        "<script>window.pwned=1</script>",
        "```",
        "<img src=x onerror=window.pwned=1><a href=javascript:window.pwned=1>raw</a>",
    ]
)
ALLOWED_ELEMENTS = ["P", "BR", "STRONG", "EM", "CODE", "A", "PRE", "H3", "H4", "H5", "H6", "HR",
                    "BLOCKQUOTE", "UL", "OL", "LI"]  # fmt: skip
CHECK_RENDERED = """
const [samples, allowed] = arguments;
const problems = [];
for (const sample of samples) {
  const box = document.createElement("div");
  renderMarkdown(box, sample);
  for (const node of box.querySelectorAll("*")) {
    if (!allowed.includes(node.tagName)) problems.push([sample, node.tagName]);
    for (const attr of node.attributes) {
      const fine = node.tagName === "A" ? ["href", "rel", "target"].includes(attr.name)
        : node.tagName === "PRE" && attr.name === "class";
      if (!fine) problems.push([sample, node.tagName, attr.name]);
    }
    const href = node.tagName === "A" ? node.href : "https:";
    if (!/^(https?:|mailto:)/.test(href)) problems.push([sample, href]);
  }
}
return problems;
"""


def hostile_samples() -> list[str]:
    """Markdown written to break out: raw HTML, script URLs in every spelling, nesting deep
    enough to exhaust a recursive renderer, and long runs of unmatched markers."""
    links = [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "java\tscript:alert(1)",
        " javascript:alert(1)",
        "vbscript:msgbox(1)",
        "data:text/html,x",
        "//evil.test/x",
        'https://ok.test/a"onmouseover="alert(1)',
        "mailto:a@b.test",
        "http://ok.test",
    ]
    samples = [f"[x]({link})" for link in links]
    samples += [f"**[*x*]({link})**" for link in links]
    samples += [
        "<img src=x onerror=alert(1)>",
        "<script>alert(1)</script>",
        "<svg onload=alert(1)>",
        "[<img src=x onerror=alert(1)>](https://ok.test)",
        "`<b>` **<i>x</i>** _<u>y</u>_",
        "> " * 40 + "deep **quote**",
        "*" * 5000,
        "[" * 5000 + "](https://ok.test)",
        "**" * 2000 + "x" + "**" * 2000,
        "_a_" * 2000,
        "- " * 100 + "item",
        "```\n<script>alert(1)</script>",
        "# <h1>x</h1> ##",
        "# " + "#" * 100_000 + " x",
        "x" * 100_000,
        "- a\n  b\n" * 5000,
        "> " * 100_000,
        "`" * 100_000,
        "1. <a href=javascript:alert(1)>x</a>",
    ]
    return samples


def test_markdown_in_model_text_is_rendered_and_no_markup_becomes_html(
    browser: WebDriver, tmp_path: Path
) -> None:
    with chat_web(tmp_path, [reply(HOSTILE_MARKDOWN)]) as (url, _gate, _portal):
        open_chat(browser, url)
        say(browser, "show me")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.assistant .md pre code"))
        answer = browser.find_element(By.CSS_SELECTOR, ".msg.assistant .md")
        assert answer.find_element(By.CSS_SELECTOR, "h3").text == "Plan"
        assert answer.find_element(By.CSS_SELECTOR, "p strong").text == "bold"
        assert answer.find_element(By.CSS_SELECTOR, "p em").text == "em"
        code = answer.find_element(By.CSS_SELECTOR, "p code").get_attribute("textContent")
        assert code == "<img src=x onerror=window.pwned=1>"
        (link,) = answer.find_elements(By.CSS_SELECTOR, "a")  # only the https one is a link
        assert link.get_attribute("href") == "https://example.org/docs"
        assert "noopener" in (link.get_attribute("rel") or "")
        assert "[evil](javascript:window.pwned=1)" in answer.text
        quote = answer.find_element(By.CSS_SELECTOR, "blockquote strong")
        assert quote.get_attribute("textContent") == "<b>not a bold tag</b>"
        fenced = answer.find_element(By.CSS_SELECTOR, "pre code").get_attribute("textContent")
        assert fenced == "<script>window.pwned=1</script>"
        conversation = browser.find_element(By.ID, "conversation")
        assert not conversation.find_elements(By.CSS_SELECTOR, "img, script, b, svg, iframe")
        assert browser.execute_script("return window.pwned === undefined")
        # a reload renders the stored text the same way
        browser.refresh()
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.assistant .md pre code"))
        assert len(browser.find_elements(By.CSS_SELECTOR, ".msg.assistant .md a")) == 1
        # the renderer itself, on input written to break out of it
        problems = browser.execute_script(CHECK_RENDERED, hostile_samples(), ALLOWED_ELEMENTS)
        assert problems == []
        assert browser.execute_script("return window.pwned === undefined")


QUESTIONS = {
    "title": "Trip",
    "questions": [
        {"id": "city", "kind": "single_choice", "prompt": "Where?", "options": ["Paris", "Rome"]},
        {"id": "nights", "kind": "number", "prompt": "Nights?", "integer": True, "minimum": 1},
    ],
}


def test_a_questionnaire_form_answered_in_the_page_answers_the_tool(
    browser: WebDriver, tmp_path: Path
) -> None:
    script = [tool_call("questionnaire", QUESTIONS), reply("Booked.")]
    with chat_web(tmp_path, script) as (url, _gate, _portal):
        open_chat(browser, url)
        say(browser, "plan a trip")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "form.questionnaire select"))
        form = browser.find_element(By.CSS_SELECTOR, "form.questionnaire")
        assert "Where?" in form.text
        assert "Nights?" in form.text
        Select(form.find_element(By.NAME, "city")).select_by_visible_text("Rome")
        form.find_element(By.NAME, "nights").send_keys("3")
        shot(browser, "questionnaire")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait(browser, lambda b: "Rome" in text(b, ".tool .result"))
        wait(browser, lambda b: "Booked." in text(b, ".msg.assistant .text"))
        assert "nights (Nights?): 3" in text(browser, ".tool .result")


def test_the_side_panel_shows_the_task_list_and_the_loaded_skill(
    browser: WebDriver, tmp_path: Path
) -> None:
    items = [{"id": "a", "content": "read the logs", "status": "done"},
             {"id": "b", "content": "write the report", "status": "in_progress"}]  # fmt: skip
    script = [
        tool_call("todo_write", {"items": items}),
        tool_call("load_skill", {"name": "triage"}),
        reply("Planned."),
    ]
    skills = SkillManager()
    skills.add_skill_dir(SKILLS)
    with chat_web(tmp_path, script, skills=SkillProxy(skills)) as (url, _gate, _portal):
        open_chat(browser, url)
        assert text(browser, "#todo") == ""
        say(browser, "plan the triage")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".approval .decide-allow_once"))
        browser.find_element(By.CSS_SELECTOR, ".approval .decide-allow_once").click()  # a write
        wait(browser, lambda b: "write the report" in text(b, "#todo"))
        wait(browser, lambda b: text(b, "#skills") == "triage")
        wait(browser, lambda b: "Planned." in text(b, ".msg.assistant .text"))
        done = browser.find_element(By.CSS_SELECTOR, "#todo .todo-done")
        assert done.get_attribute("textContent") == "✓ read the logs"
        shot(browser, "side-panel")
        browser.refresh()  # the panel comes back from the server's state
        wait(browser, lambda b: "write the report" in text(b, "#todo"))
        assert text(browser, "#skills") == "triage"


def test_a_script_progress_bar_fills_as_the_run_reports(browser: WebDriver, tmp_path: Path) -> None:
    script = [tool_call("crunch", {"items": 10}), reply("Crunched.")]
    with chat_web(tmp_path, script) as (url, gate, portal):
        open_chat(browser, url)
        say(browser, "crunch")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".tool .script progress"))
        bar = browser.find_element(By.CSS_SELECTOR, ".tool .script progress")
        assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("3", "10")
        assert "running: 3 calls" in text(browser, ".tool .script")
        assert len(browser.find_elements(By.CSS_SELECTOR, ".tool")) == 1  # on the call's card
        portal.call(gate.event.set)
        wait(browser, lambda b: "ok: 10 calls" in text(b, ".tool .script"))
        bar = browser.find_element(By.CSS_SELECTOR, ".tool .script progress")
        assert bar.get_attribute("value") == "10"
        wait(browser, lambda b: "crunched 10" in text(b, ".tool .result"))


def test_the_console_chat_page_runs_an_upstream_tool_after_an_approval_in_the_page(
    browser: WebDriver, tmp_path: Path
) -> None:
    script = [
        tool_call("fault__echo", {"text": MARKUP}),
        reply("**Echoed**, see [the docs](https://example.org/chat)."),
    ]
    with console_chat(tmp_path, script) as served:
        open_console_chat(browser, served.login_url())
        say(browser, "echo the markup")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".approval .decide-allow_once"))
        assert "fault__echo" in text(browser, ".approval strong")
        shot(browser, "console")
        browser.find_element(By.CSS_SELECTOR, ".approval .decide-allow_once").click()
        wait(browser, lambda b: MARKUP in text(b, ".tool .result"))
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".msg.assistant .md strong"))
        link = browser.find_element(By.CSS_SELECTOR, ".msg.assistant .md a")
        assert link.get_attribute("href") == "https://example.org/chat"
        assert not browser.find_element(By.ID, "conversation").find_elements(
            By.CSS_SELECTOR, "b, img"
        )
        browser.refresh()  # the conversation is the server's
        wait(browser, lambda b: MARKUP in text(b, ".tool .result"))
        assert text(browser, ".msg.user .text") == "echo the markup"


def test_the_console_chat_asks_a_gateway_run_script_in_the_page_and_runs_it(
    browser: WebDriver, tmp_path: Path
) -> None:
    code = "from agent_tools import call\nprint(call('fault__echo', {'text': 'from-the-page'}))"
    arguments = {"code": code, "tools": ["fault__echo"], "description": "echo once"}
    script = [tool_call("run_script", arguments), reply("The script ran.")]
    with console_chat(tmp_path, script) as served:
        open_console_chat(browser, served.login_url())
        say(browser, "run the script")
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".approval .decide-allow_once"))
        assert "from-the-page" in text(browser, ".approval .request")  # the script, whole
        buttons = browser.find_elements(By.CSS_SELECTOR, ".approval .decide")
        assert [b.get_attribute("class") for b in buttons] == [
            "decide decide-allow_once",
            "decide decide-deny",
        ]
        browser.refresh()  # the card comes back from the server
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".approval .decide-allow_once"))
        browser.find_element(By.CSS_SELECTOR, ".approval .decide-allow_once").click()
        wait(browser, lambda b: "from-the-page" in text(b, ".tool .result"))
        wait(browser, lambda b: "The script ran." in text(b, ".msg.assistant .text"))
