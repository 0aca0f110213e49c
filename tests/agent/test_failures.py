"""The run's failure paths: cancellation, model HTTP errors and retries, broken streams."""

from __future__ import annotations

import email.utils
import time
from contextlib import aclosing

import anyio
import pytest

from sagents.agent import MessageDeltaEvent, MessageEvent, OpenAIChatModel, SAgent
from sagents.agent._model import retry_delay
from sagents.core.events import ToolProgressEvent
from sagents.errors import ModelConfigError
from sagents.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    http_error,
    reply,
    tool_call,
)
from sagents.tool import SessionContext, ToolManager, emit_tool_progress, tool
from tests.agent.helpers import (
    RUN_TIMEOUT_S,
    WatchedModel,
    assert_settled_once,
    collect,
    collect_cancelling_at_first_text,
    done_of,
    tool_messages,
)

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]


class Blocker:
    """A tool that blocks until cancelled, and says so."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()

    def manager(self) -> ToolManager:
        @tool(permission="read_only")
        async def block() -> str:
            """Block until cancelled."""
            self.started.set()
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.set()
            return ""

        @tool(permission="read_only")
        async def quick() -> str:
            """Answer at once."""
            return "quick"

        manager = ToolManager()
        manager.register_tool(block)
        manager.register_tool(quick)
        return manager


async def test_agent_cancel_mid_tool_cancels_the_tool_settles_the_batch_and_ends_cancelled() -> (
    None
):
    blocker = Blocker()
    calls = (
        ScriptedToolCall(name="quick", id="c_quick"),
        ScriptedToolCall(name="block", id="c_block"),
    )
    async with ScriptedModel([ScriptedReply(tool_calls=calls)]) as model:
        agent = SAgent(model=model.chat_model(), max_parallel_tools=1)  # quick ends first
        async with anyio.create_task_group() as tg:

            async def cancel_when_started() -> None:
                await blocker.started.wait()
                agent.cancel()

            tg.start_soon(cancel_when_started)
            events = await collect(agent, USER, tool_manager=blocker.manager())
    done = done_of(events)
    assert done.reason == "cancelled"
    assert blocker.cancelled.is_set()
    assert_settled_once(done.messages)
    quick, block = tool_messages(done.messages)
    assert quick["content"] == "quick"
    assert "cancelled" in block["content"]


async def test_cancelling_the_consumer_mid_tool_leaves_a_settled_history() -> None:
    blocker = Blocker()
    async with ScriptedModel([tool_call("block", {}, id="c1")]) as model:
        agent = SAgent(model=model.chat_model())
        context = SessionContext(session_id="consumer-cancel")
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as scope:

                    async def cancel_when_started() -> None:
                        await blocker.started.wait()
                        scope.cancel()

                    tg.start_soon(cancel_when_started)
                    stream = agent.run_stream(
                        USER, tool_manager=blocker.manager(), session_context=context
                    )
                    async with aclosing(stream):
                        async for _event in stream:
                            pass
    assert scope.cancelled_caught
    assert blocker.cancelled.is_set()
    state = agent.session("consumer-cancel")
    assert state is not None
    assert_settled_once(state.messages)
    assert "cancelled" in tool_messages(state.messages)[0]["content"]


async def test_closing_the_iterator_mid_tool_cancels_the_tool_and_settles_before_it_returns() -> (
    None
):
    blocker = Blocker()
    manager = blocker.manager()

    @tool(permission="read_only")
    async def reports() -> str:
        """Report progress, then block."""
        await emit_tool_progress("working\n")
        await anyio.sleep_forever()
        return "never"

    manager.register_tool(reports)
    calls = (
        ScriptedToolCall(name="reports", id="c_reports"),
        ScriptedToolCall(name="block", id="c_block"),
    )
    async with ScriptedModel([ScriptedReply(tool_calls=calls)]) as model:
        agent = SAgent(model=model.chat_model())
        context = SessionContext(session_id="closed-mid-tool")
        with anyio.fail_after(RUN_TIMEOUT_S):
            stream = agent.run_stream(USER, tool_manager=manager, session_context=context)
            async with aclosing(stream):
                async for event in stream:
                    if isinstance(event, ToolProgressEvent):
                        await blocker.started.wait()  # both calls run now
                        break  # holding an event of the batch: closing stops the batch
            # aclose has returned: the tools were cancelled and the history settled already
            assert blocker.cancelled.is_set()
            state = agent.session("closed-mid-tool")
            assert state is not None
            assert_settled_once(state.messages)
            results = tool_messages(state.messages)
            assert [m["tool_call_id"] for m in results] == ["c_reports", "c_block"]
            assert all("cancelled" in m["content"] for m in results)


@pytest.mark.parametrize("approvals", ["wait", "defer"])
async def test_closing_the_iterator_at_the_answer_with_calls_settles_them_before_it_returns(
    approvals: str,
) -> None:
    """Closed at the assistant message, before its batch of calls started: nothing ran, and the
    session's history answers each call all the same."""
    blocker = Blocker()
    calls = (
        ScriptedToolCall(name="block", id="c_one"),
        ScriptedToolCall(name="block", id="c_two"),
    )
    async with ScriptedModel([ScriptedReply(tool_calls=calls)]) as model:
        agent = SAgent(model=model.chat_model())
        context = SessionContext(session_id="closed-at-the-answer")
        with anyio.fail_after(RUN_TIMEOUT_S):
            stream = agent.run_stream(
                USER,
                tool_manager=blocker.manager(),
                session_context=context,
                approvals=approvals,  # type: ignore[arg-type]
            )
            async with aclosing(stream):
                async for event in stream:
                    if isinstance(event, MessageEvent) and event.message.get("tool_calls"):
                        break
        assert not blocker.started.is_set()  # the batch never started
        state = agent.session("closed-at-the-answer")
        assert state is not None
        assert_settled_once(state.messages)
        results = tool_messages(state.messages)
        assert [m["tool_call_id"] for m in results] == ["c_one", "c_two"]
        assert all("cancelled" in m["content"] for m in results)


async def test_agent_cancel_mid_stream_stops_the_model_stream_and_adds_no_partial_message() -> None:
    slow = ScriptedReply(content="a long answer that never ends", hang_after_chunks=2)
    async with ScriptedModel([slow]) as model:
        agent = SAgent(model=model.chat_model())
        events = await collect_cancelling_at_first_text(agent, USER, tool_manager=ToolManager())
    done = done_of(events)
    assert done.reason == "cancelled"
    assert list(done.messages) == USER


async def test_cancelling_the_consumer_mid_stream_closes_the_model_stream() -> None:
    slow = ScriptedReply(content="a long answer that never ends", hang_after_chunks=2)
    async with ScriptedModel([slow]) as model:
        watched = WatchedModel(model.chat_model())
        agent = SAgent(model=watched)
        context = SessionContext(session_id="consumer-cancel-stream")
        with anyio.fail_after(RUN_TIMEOUT_S), anyio.CancelScope() as scope:
            stream = agent.run_stream(USER, tool_manager=ToolManager(), session_context=context)
            async with aclosing(stream):
                async for event in stream:
                    if isinstance(event, MessageDeltaEvent):
                        scope.cancel()  # the next read of the hanging stream is cancelled
        assert scope.cancelled_caught
        assert watched.closed.is_set()
    state = agent.session("consumer-cancel-stream")
    assert state is not None
    assert list(state.messages) == USER  # no partial answer


async def test_http_429_is_retried_after_retry_after_and_the_run_succeeds() -> None:
    script = [http_error(429, "slow down", retry_after=0.01), reply("finally")]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "finally"
    assert len(model.requests) == 2


async def test_5xx_after_every_retry_ends_the_run_with_model_unavailable() -> None:
    script = [http_error(503, "down", retry_after=0), http_error(503, "down", retry_after=0)]
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(max_retries=1))
        done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_unavailable"
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("reply_", "code", "hint_word"),
    [
        (http_error(401, "invalid api key"), "model_auth_failed", "OPENAI_API_KEY"),
        (http_error(404, "no such model"), "model_not_found", "SAGENTS_MODEL"),
        (
            http_error(
                400,
                "This model's maximum context length is 8192 tokens",
                code="context_length_exceeded",
            ),
            "context_length_exceeded",
            "shorten",
        ),
    ],
)
async def test_401_404_and_context_length_are_clear_errors_and_not_retried(
    reply_: ScriptedReply, code: str, hint_word: str
) -> None:
    async with ScriptedModel([reply_]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == code
    assert hint_word in done.error["hint"]
    assert len(model.requests) == 1


async def test_a_stream_that_breaks_mid_tool_call_leaves_no_orphaned_call() -> None:
    calls = (ScriptedToolCall(name="quick", arguments={"x": 1}, id="c1"),)
    broken = ScriptedReply(content="let me check", tool_calls=calls, break_after_chunks=3)
    async with ScriptedModel([broken]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER, tool_manager=Blocker().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert list(done.messages) == USER
    assert_settled_once(done.messages)


def test_retry_delay_follows_retry_after_in_seconds_milliseconds_or_a_date() -> None:
    assert retry_delay(1, {"retry-after": "2"}) == 2.0
    assert retry_delay(1, {"retry-after-ms": "250"}) == 0.25
    assert retry_delay(1, {"retry-after": "3600"}) == 3600.0  # the caller refuses a long wait
    date = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert 3.0 < retry_delay(1, {"retry-after": date}) <= 5.0
    assert 0.25 <= retry_delay(1, {}) <= 0.5
    assert 1.0 <= retry_delay(3, None) <= 2.0


def test_a_model_without_an_endpoint_says_which_variables_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SAGENTS_MODEL", "m")
    with pytest.raises(ModelConfigError) as caught:
        OpenAIChatModel()
    assert "OPENAI_BASE_URL" in str(caught.value)
    monkeypatch.delenv("SAGENTS_MODEL")
    with pytest.raises(ModelConfigError, match="SAGENTS_MODEL"):
        OpenAIChatModel(base_url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:m", "OPENAI_BASE_URL"),
        ("openai-responses:m", "OPENAI_BASE_URL"),
        ("anthropic:m", "ANTHROPIC_BASE_URL"),
        ("gemini:m", "GOOGLE_GEMINI_BASE_URL"),
    ],
)
@pytest.mark.parametrize(
    "url",
    ["http://[::1", "http://127.0.0.1:99999/v1", "notaurl", "ftp://127.0.0.1/v1", "http:///v1"],
    ids=["bracket", "port", "no-scheme", "ftp", "no-host"],
)
def test_a_bad_base_url_in_the_environment_is_a_clear_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, spec: str, variable: str, url: str
) -> None:
    # a traceback at construction (httpx's InvalidURL), a run ending in internal_error (an
    # out-of-range port) or "connection error" (no scheme) otherwise: a configuration error,
    # refused before anything is sent
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "key")
    monkeypatch.setenv(variable, url)
    with pytest.raises(ModelConfigError) as caught:
        SAgent(model=spec)
    assert variable in str(caught.value)
    assert url in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:m", "OPENAI_API_KEY"),
        ("openai-responses:m", "OPENAI_API_KEY"),
        ("anthropic:m", "ANTHROPIC_API_KEY"),
        ("gemini:m", "GEMINI_API_KEY"),
    ],
)
@pytest.mark.parametrize(
    "key", ["sk-abc\n", "sk-\u00e9t\u00e9", "sk-\x7f"], ids=["newline", "accent", "del"]
)
def test_an_api_key_no_http_header_can_carry_is_a_clear_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, spec: str, variable: str, key: str
) -> None:
    # a key pasted with its newline or a non-ASCII letter: "connection error" (the server is
    # fine), internal_error "a bug in sagents", or retries otherwise, at the first call
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv(variable, key)
    with pytest.raises(ModelConfigError) as caught:
        SAgent(model=spec)
    assert variable in str(caught.value)
    assert key not in str(caught.value)  # a secret is not echoed


async def test_leaving_the_loop_with_break_does_not_disturb_the_consumers_cancel_scopes() -> None:
    async with ScriptedModel([reply("a long answer " * 20), reply("second")]) as model:
        agent = SAgent(model=model.chat_model())
        with anyio.fail_after(RUN_TIMEOUT_S):  # exiting this scope would fail if corrupted
            async for event in agent.run_stream(USER, tool_manager=ToolManager()):
                assert isinstance(event, MessageDeltaEvent)
                break
        with anyio.fail_after(RUN_TIMEOUT_S):
            done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "second"


async def test_agent_cancel_while_a_whole_answer_is_awaited_ends_cancelled() -> None:
    asked = anyio.Event()

    def hang(body: dict[str, object]) -> ScriptedReply:
        asked.set()
        return ScriptedReply(content="never sent", hang_after_chunks=0)

    async with ScriptedModel(hang) as model:
        agent = SAgent(model=model.chat_model(stream=False))
        async with anyio.create_task_group() as tg:

            async def cancel_when_asked() -> None:
                await asked.wait()
                agent.cancel()

            tg.start_soon(cancel_when_asked)
            done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "cancelled"
    assert list(done.messages) == USER
