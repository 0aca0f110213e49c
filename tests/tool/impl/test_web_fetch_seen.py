"""``web_fetch`` with ``seen_urls_only``: only URLs a user message or a tool result gave are
fetched (never one only the model wrote); off by default."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sagents.agent import SAgent
from sagents.config import parse_config
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager
from sagents.tool._conversation import urls_given, urls_in
from sagents.tool.impl import WebFetchSettings, register_builtin_tools
from sagents.tool.tool_base import tool
from tests.agent.helpers import collect, done_of, tool_messages
from tests.tool.impl.test_web_fetch import PAGE, Server, _fetch, _send, _serve

pytestmark = pytest.mark.anyio

SEEN_ONLY = WebFetchSettings(allow_networks=("127.0.0.0/8",), seen_urls_only=True)


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _serve("127.0.0.1")


def _manager(settings: WebFetchSettings) -> ToolManager:
    manager = ToolManager()
    register_builtin_tools(manager, None, names=["web_fetch"], web_fetch=settings)
    return manager


async def _agent_run(manager: ToolManager, user: str, calls: list[Any]) -> list[dict[str, Any]]:
    async with ScriptedModel([*calls, reply("done")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        events = await collect(
            agent,
            [{"role": "user", "content": user}],
            tool_manager=manager,
            session_context=SessionContext(session_id="w"),
        )
    return [dict(m) for m in done_of(events).messages]


async def test_a_url_the_user_gave_is_fetched_and_one_only_the_model_wrote_is_not(
    server: Server,
) -> None:
    base = f"http://127.0.0.1:{server.port}"
    server.routes["/given"] = lambda h: _send(h, PAGE, "text/html")
    server.routes["/invented"] = lambda h: _send(h, PAGE, "text/html")
    calls = [
        tool_call("web_fetch", {"url": f"{base}/given#top"}, id="c1"),
        tool_call(
            "web_fetch",
            {"url": f"{base}/invented"},
            id="c2",
            content=f"I will also read {base}/invented",  # the model's own text does not count
        ),
    ]
    messages = await _agent_run(_manager(SEEN_ONLY), f"Summarise {base}/given, please.", calls)
    given, invented = tool_messages(messages)
    assert "Title: Loopback page" in given["content"]
    assert "url_not_allowed" in invented["content"]
    assert "has not appeared in the conversation" in invented["content"]
    assert [path for path, _headers in server.seen] == ["/given"]


async def test_a_url_from_a_tool_result_may_be_followed(server: Server) -> None:
    base = f"http://127.0.0.1:{server.port}"
    linking = f"<html><body><a href='{base}/next'>next</a></body></html>".encode()
    server.routes["/start"] = lambda h: _send(h, linking, "text/html")
    server.routes["/next"] = lambda h: _send(h, PAGE, "text/html")
    calls = [
        tool_call("web_fetch", {"url": f"{base}/start"}, id="c1"),
        tool_call("web_fetch", {"url": f"{base}/next"}, id="c2"),
    ]
    messages = await _agent_run(_manager(SEEN_ONLY), f"Start at <{base}/start>.", calls)
    assert "Title: Loopback page" in tool_messages(messages)[1]["content"]
    assert [path for path, _headers in server.seen] == ["/start", "/next"]


async def test_the_option_is_off_by_default(server: Server) -> None:
    server.routes["/page"] = lambda h: _send(h, PAGE, "text/html")
    settings = WebFetchSettings(allow_networks=("127.0.0.0/8",))
    _data, _text, is_error, _code = await _fetch(
        settings, url=f"http://127.0.0.1:{server.port}/page"
    )
    assert not is_error


async def test_a_host_without_a_conversation_is_refused_saying_why(server: Server) -> None:
    _data, text, is_error, code = await _fetch(
        SEEN_ONLY, url=f"http://127.0.0.1:{server.port}/page"
    )
    assert is_error
    assert code == "url_not_allowed"
    assert "shows it no conversation" in text
    assert server.seen == []


def test_urls_are_read_from_user_and_tool_text_without_surrounding_punctuation() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "see https://system.example/a"},
        {"role": "user", "content": "Read https://a.example/x. And (https://b.example/y)!"},
        {"role": "user", "content": [{"type": "text", "text": "**https://c.example/z**"}]},
        {"role": "assistant", "content": "I invent https://model.example/q"},
        {"role": "tool", "tool_call_id": "t", "content": "[w](https://en.example/W_(x)) end"},
    ]
    assert urls_in(messages) == [
        "https://a.example/x",
        "https://b.example/y",
        "https://c.example/z",
        "https://en.example/W_(x)",
    ]


def test_the_config_key_turns_the_option_on() -> None:
    config = parse_config({"builtinTools": {"webFetch": {"seenUrlsOnly": True}}})
    assert config.web_fetch.seen_urls_only is True
    assert parse_config({}).web_fetch.seen_urls_only is False


async def test_a_refusal_does_not_launder_the_url_it_refused(server: Server) -> None:
    """The first refusal neither quotes the URL nor makes it seen: the second call is
    refused too, and the server is never asked."""
    base = f"http://127.0.0.1:{server.port}"
    server.routes["/collect"] = lambda h: _send(h, PAGE, "text/html")
    leak = f"{base}/collect?secret=s3cr3t"
    calls = [
        tool_call("web_fetch", {"url": leak}, id="c1"),
        tool_call("web_fetch", {"url": leak}, id="c2"),
    ]
    messages = await _agent_run(_manager(SEEN_ONLY), "What is new today?", calls)
    first, second = tool_messages(messages)
    for refused in (first, second):
        assert "url_not_allowed" in refused["content"]
        assert "/collect" not in refused["content"]
        assert "s3cr3t" not in refused["content"]
    assert server.seen == []


@tool(name="echo", description="Return the text.", permission="read_only")
async def echo(text: str) -> str:
    return text


async def test_a_tool_that_echoes_a_model_written_url_does_not_make_it_seen(
    server: Server,
) -> None:
    """The URL's first appearance is the assistant's tool call (echo's arguments); the tool
    result that repeats it later does not count."""
    base = f"http://127.0.0.1:{server.port}"
    server.routes["/collect"] = lambda h: _send(h, PAGE, "text/html")
    leak = f"{base}/collect?secret=s3cr3t"
    manager = _manager(SEEN_ONLY)
    manager.register_tool(echo)
    calls = [
        tool_call("echo", {"text": f"see {leak}"}, id="c1"),
        tool_call("web_fetch", {"url": leak}, id="c2"),
    ]
    messages = await _agent_run(manager, "What is new today?", calls)
    echoed, fetched = tool_messages(messages)
    assert leak in echoed["content"]  # the tool result has it, after the model wrote it
    assert "url_not_allowed" in fetched["content"]
    assert server.seen == []


ECHOED = (
    "https://model.example/b https://escaped.example/c https://args.example/d "
    "https://page.example/e https://user.example/a"
)


def test_a_url_counts_as_given_only_when_its_first_appearance_is_a_user_or_tool_message() -> None:
    def call(arguments: str) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t", "type": "function", "function": {"name": "f", "arguments": arguments}}
        ]}  # fmt: skip

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "start at https://user.example/a"},
        {"role": "assistant", "content": "then https://model.example/b"},
        call('{"u": "https:\\/\\/escaped.example\\/c"}'),  # JSON escapes hide nothing
        call('{"u": "https://args.example/d"}'),
        {"role": "tool", "tool_call_id": "t", "content": ECHOED},
        {"role": "assistant", "content": "https://page.example/e again"},
    ]
    assert urls_given(messages) == {"https://user.example/a", "https://page.example/e"}
