"""One conformance suite, run on every adapter of the model seam.

``ScriptedModel(api=...)`` writes the same scripted replies in each API's wire format (Chat
Completions, Responses, Anthropic Messages, Gemini), streamed and whole; each adapter reads them
through its provider's official SDK client, and the agent loop runs the same cases on each: a
text turn, a tool turn, parallel calls, an approval denied, cancellation mid-answer or while a
whole answer is awaited, ``max_turns``, a rate limit with ``Retry-After`` (each of its forms),
a 429 without quota, keep-alives against the idle timeout and the deadline, a context-length
refusal compressed and retried, a stream cut before
and after part of it was passed on, an error answer that is not retried, a run_script turn (the
script calls a real MCP server's tools; the result goes back), structured output
(``output_type``: asked for the provider's native way, validated, an answer that does not fit
sent back). A new adapter is one more entry in ``APIS``; ``test_server_loops.py`` runs the loop
cases on each recorded server's tool-call answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from sagents.agent import (
    CompressionSettings,
    HistoryCompressEvent,
    MessageDeltaEvent,
    SAgent,
    UsageEvent,
)
from sagents.agent._events import AgentEvent, DoneEvent
from sagents.core.events import ApprovalResultEvent, ScriptProgressEvent
from sagents.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
    http_error,
    reply,
)
from sagents.tool import SessionContext, ToolManager
from tests.agent.helpers import (
    RUN_TIMEOUT_S,
    assert_settled_once,
    collect,
    collect_cancelling_at_first_text,
    done_of,
    tool_messages,
)
from tests.agent.test_servers import Deny, Tools

pytestmark = pytest.mark.anyio

APIS = ("chat", "responses", "anthropic", "gemini")
USER = [{"role": "user", "content": "go"}]
AUTO = SessionContext(permission_mode="auto")
CASES = [
    pytest.param(api, stream, id=f"{api}-{'stream' if stream else 'whole'}")
    for api in APIS
    for stream in (True, False)
]


async def run(
    api: str,
    script: Sequence[ScriptedReply | str],
    *,
    stream: bool = True,
    agent_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[list[AgentEvent], DoneEvent, ScriptedModel, Tools]:
    tools = Tools()
    kwargs.setdefault("session_context", AUTO)
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(stream=stream), run_script=False, **(agent_options or {})
        )
        events = await collect(agent, USER, tool_manager=tools.manager(), **kwargs)
    done = done_of(events)
    assert_settled_once(done.messages)
    return events, done, server, tools


def sent_text(server: ScriptedModel, index: int) -> str:
    """The request body ``index`` as JSON text (to find what was sent back, in any format)."""
    return json.dumps(server.requests[index], ensure_ascii=False)


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_a_text_turn_streams_its_text_and_reports_usage(api: str, stream: bool) -> None:
    events, done, server, _tools = await run(
        api,
        [reply("Hello there, how can I help?", prompt_tokens=21, completion_tokens=7)],
        stream=stream,
    )
    assert done.reason == "stop"
    assert "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent)) == (
        "Hello there, how can I help?"
    )
    assert done.messages[-1] == {"role": "assistant", "content": "Hello there, how can I help?"}
    usage = [
        (e.purpose, e.prompt_tokens, e.completion_tokens)
        for e in events
        if isinstance(e, UsageEvent)
    ]
    assert usage == [("turn", 21, 7)]
    assert "go" in sent_text(server, 0)


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_a_tool_turn_runs_the_call_once_and_sends_its_result_back(
    api: str, stream: bool
) -> None:
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_paris1")
    _events, done, server, tools = await run(
        api, [ScriptedReply(tool_calls=(call,)), reply("Sunny.")], stream=stream
    )
    assert done.reason == "stop"
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    (result,) = tool_messages(done.messages)
    assert result["tool_call_id"] == "call_paris1"
    assert "sunny in Paris" in sent_text(server, 1)
    assert "call_paris1" in sent_text(server, 1)
    assert "get_weather" in sent_text(server, 0)  # the tool was offered


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_parallel_calls_each_run_once_in_call_order(api: str, stream: bool) -> None:
    calls = (
        ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_a"),
        ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, id="call_b"),
    )
    _events, done, server, tools = await run(
        api, [ScriptedReply(tool_calls=calls), reply("Both sunny.")], stream=stream
    )
    assert sorted(c[1]["city"] for c in tools.calls) == ["Oslo", "Paris"]
    assert [m["tool_call_id"] for m in tool_messages(done.messages)] == ["call_a", "call_b"]
    second = sent_text(server, 1)
    assert second.index("sunny in Paris") < second.index("sunny in Oslo")


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_a_denied_call_is_settled_and_the_rest_of_the_batch_runs(
    api: str, stream: bool
) -> None:
    calls = (
        ScriptedToolCall(name="save", arguments={"path": "a.txt"}, id="call_save"),
        ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, id="call_oslo"),
    )
    deny = Deny()
    events, done, _server, tools = await run(
        api,
        [ScriptedReply(tool_calls=calls), reply("ok")],
        stream=stream,
        session_context=SessionContext(permission_mode="ask"),
        approver=deny,
    )
    assert tools.calls == [("get_weather", {"city": "Oslo"})]
    denied, weather = tool_messages(done.messages)
    assert "denied by the user" in denied["content"]
    assert "Oslo" in weather["content"]
    assert [e.approved for e in events if isinstance(e, ApprovalResultEvent)] == [False]


@pytest.mark.parametrize("api", APIS)
async def test_cancel_mid_answer_ends_cancelled_without_a_partial_message(api: str) -> None:
    # four pieces: in every format, some text has come by then and the finish has not
    slow = ScriptedReply(content="a long answer that never ends", hang_after_chunks=4)
    async with ScriptedModel([slow], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(), run_script=False)
        events = await collect_cancelling_at_first_text(agent, USER, tool_manager=Tools().manager())
    done = done_of(events)
    assert done.reason == "cancelled"
    assert list(done.messages) == USER


@pytest.mark.parametrize("api", APIS)
async def test_cancel_while_a_whole_answer_is_awaited_ends_cancelled(api: str) -> None:
    agents: list[SAgent] = []

    def cancel_on_arrival(body: dict[str, Any]) -> WireReply:
        agents[0].cancel()  # the request reached the server: the run awaits its answer
        return WireReply(headers={"content-type": "application/json"}, end="hang")

    async with ScriptedModel(cancel_on_arrival, api=api) as server:  # type: ignore[arg-type]
        agents.append(SAgent(model=server.chat_model(stream=False), run_script=False))
        events = await collect(agents[0], USER, tool_manager=Tools().manager())
    done = done_of(events)
    assert done.reason == "cancelled"
    assert list(done.messages) == USER
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("chunks", [0, 4], ids=["before-the-first-piece", "mid-answer"])
async def test_a_cancel_from_another_task_while_a_streamed_read_awaits_ends_cancelled(
    api: str, chunks: int
) -> None:
    agents: list[SAgent] = []
    ready = anyio.Event()  # the run awaits the next piece of an answer that hangs now

    def hang_after(body: dict[str, Any]) -> ScriptedReply:
        if not chunks:
            ready.set()  # the request reached the server: no piece will come
        return ScriptedReply(content="a long answer that never ends", hang_after_chunks=chunks)

    async def cancel() -> None:
        await ready.wait()
        agents[0].cancel()  # runs while the run's task awaits in its read

    events: list[AgentEvent] = []
    async with ScriptedModel(hang_after, api=api) as server:  # type: ignore[arg-type]
        agents.append(SAgent(model=server.chat_model(), run_script=False))
        run = agents[0].run_stream(USER, tool_manager=Tools().manager())
        async with anyio.create_task_group() as tg, aclosing(run):
            tg.start_soon(cancel)
            with anyio.fail_after(RUN_TIMEOUT_S):
                async for event in run:
                    events.append(event)
                    if isinstance(event, MessageDeltaEvent):
                        ready.set()  # the hang comes after the pieces sent
    done = done_of(events)
    assert done.reason == "cancelled"
    assert list(done.messages) == USER
    assert any(isinstance(e, MessageDeltaEvent) for e in events) == bool(chunks)


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_max_turns_ends_the_run_with_every_call_settled(api: str, stream: bool) -> None:
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}, id="call_rome")
    _events, done, server, tools = await run(
        api, [ScriptedReply(tool_calls=(call,))], stream=stream, agent_options={"max_turns": 1}
    )
    assert done.reason == "max_turns"
    assert tools.calls == [("get_weather", {"city": "Rome"})]
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_rate_limit_is_retried_after_retry_after(api: str) -> None:
    _events, done, server, _tools = await run(
        api, [http_error(429, "slow down", retry_after=0.01), reply("finally")]
    )
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "finally"
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_retry_after_longer_than_allowed_ends_the_call_clearly(api: str) -> None:
    _events, done, server, _tools = await run(api, [http_error(429, "wait", retry_after=120)])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_unavailable"
    assert "asks to wait 120 s" in done.error["message"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "abc"},
        {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},  # in the past: at once
        {"retry-after-ms": "20"},
    ],
    ids=["garbage", "past-date", "ms"],
)
async def test_every_form_of_retry_after_is_read_and_the_retry_succeeds(
    api: str, headers: dict[str, str]
) -> None:
    busy = ScriptedReply(status=503, error_message="busy", headers=headers)
    _events, done, server, _tools = await run(api, [busy, reply("finally")])
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "finally"
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", ["chat", "responses"])  # the OpenAI API's code; Gemini's own
async def test_a_429_for_an_account_without_quota_is_not_retried(api: str) -> None:
    # daily quota is tests/agent/test_gemini.py's; Anthropic has no such 429
    no_quota = ScriptedReply(
        status=429, error_message="You exceeded your current quota", error_code="insufficient_quota"
    )
    _events, done, server, _tools = await run(api, [no_quota, reply("never")])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_quota_exhausted"
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_rejected_request_is_not_retried_nor_called_transient(api: str) -> None:
    _events, done, server, _tools = await run(api, [http_error(400, "bad field"), reply("never")])
    assert done.reason == "error"
    assert done.error is not None
    assert "bad field" in done.error["message"]
    assert "try again later" not in json.dumps(done.error)
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_cut_before_anything_was_passed_on_is_retried(api: str) -> None:
    cut = ScriptedReply(content="never seen", break_after_chunks=0)
    _events, done, server, _tools = await run(api, [cut, reply("second try")])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "second try"
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_cut_after_text_was_passed_on_is_an_error_not_an_answer(api: str) -> None:
    cut = ScriptedReply(content="the first part of a long answer", break_after_chunks=3)
    _events, done, server, _tools = await run(api, [cut, reply("never")])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert list(done.messages) == USER
    assert len(server.requests) == 1


# each API's words for a prompt past the model's window (OpenAI's code, Anthropic's "prompt is
# too long", Gemini's "input token count ... exceeds the maximum number of tokens")
TOO_LONG = http_error(
    400,
    "prompt is too long: the input token count (9000) exceeds the maximum number of tokens "
    "allowed (8192)",
    code="context_length_exceeded",
)
HISTORY = [
    {"role": "user", "content": "the task: summarise the logs"},
    {"role": "assistant", "content": "Reading them. " * 40},
    {"role": "user", "content": "also count the errors"},
    {"role": "assistant", "content": "Counted. " * 40},
    {"role": "user", "content": "now write it up"},
]


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_length_under_the_budget_is_compressed_and_sent_once_more(
    api: str, tmp_path: Path
) -> None:
    # the budget is far above what the model takes (a token count that undercounts the
    # model's own tokenizer, a budget set for a larger model): the server's refusal is what
    # counts, so the history is compressed with the default settings and the request retried
    script = [TOO_LONG, reply("SUMMARY"), reply("the write-up")]
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(),
            run_script=False,
            max_history_tokens=100_000,
            compression=CompressionSettings(records_dir=tmp_path),
        )
        events = await collect(agent, HISTORY, tool_manager=Tools().manager(), session_context=AUTO)
    done = done_of(events)
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "the write-up"
    assert [e.reason for e in events if isinstance(e, HistoryCompressEvent)] == ["context_length"]
    assert len(server.requests) == 3
    users = [m["content"] for m in done.messages if m["role"] == "user"]
    assert users[:2] == ["the task: summarise the logs", "also count the errors"]
    assert users[-1] == "now write it up"
    assert not any("Reading them." in str(m["content"]) for m in done.messages)


def _first_pieces(api: str, count: int) -> tuple[str, ...]:
    """The first pieces of a streamed text answer in ``api``'s wire format."""
    from sagents.testing import _formats, _scripted

    scripted = reply("a long answer that never ends")
    if api == "chat":
        pieces = _scripted._chat_pieces(scripted, [], include_usage=True)
    else:
        pieces = _formats.pieces(api, scripted, [])  # type: ignore[arg-type]
    return tuple(pieces[:count])


@pytest.mark.parametrize("api", APIS)
async def test_keepalives_after_the_first_piece_do_not_hold_the_idle_timeout(api: str) -> None:
    # a proxy trickling SSE comments (": keep-alive") while the answer stalls: the idle timeout
    # ends the call however many comments come, and nothing of it is taken as an answer
    trickle = WireReply(body=_first_pieces(api, 4), end="keepalive")
    async with ScriptedModel([trickle], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(timeout=1.0, max_retries=0), run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_timeout"
    assert done.error["details"]["limit"] == "timeout"
    assert list(done.messages) == USER


@pytest.mark.parametrize("api", APIS)
async def test_keepalives_end_at_the_call_s_deadline_however_long_the_idle_timeout(
    api: str,
) -> None:
    trickle = WireReply(body=_first_pieces(api, 4), end="keepalive")
    async with ScriptedModel([trickle], api=api) as server:  # type: ignore[arg-type]
        model = server.chat_model(timeout=600.0, deadline=1.0, max_retries=0)
        agent = SAgent(model=model, run_script=False)
        done = done_of(await collect(agent, USER, tool_manager=Tools().manager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_timeout"
    assert done.error["details"]["limit"] == "deadline"
    assert list(done.messages) == USER


class Forecast(BaseModel):
    """A city's weather."""

    city: str
    temperature: int


def asked_schema(api: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The JSON Schema a request asks the answer to fit, where each API puts it (OpenAI
    "Structured Outputs": ``response_format`` / ``text.format``; Anthropic "Structured outputs":
    ``output_config.format``; Gemini "Structured output": ``generationConfig``)."""
    if api == "chat":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "Forecast"
        schema: Mapping[str, Any] = body["response_format"]["json_schema"]["schema"]
    elif api == "responses":
        assert body["text"]["format"]["type"] == "json_schema"
        assert body["text"]["format"]["name"] == "Forecast"
        schema = body["text"]["format"]["schema"]
    elif api == "anthropic":
        assert body["output_config"]["format"]["type"] == "json_schema"
        schema = body["output_config"]["format"]["schema"]
    else:
        assert body["generationConfig"]["responseMimeType"] == "application/json"
        schema = body["generationConfig"]["responseJsonSchema"]
    return schema


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_a_structured_answer_is_asked_for_natively_and_validated_into_the_type(
    api: str, stream: bool
) -> None:
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_paris1")
    answer = '{"city": "Paris", "temperature": 21}'
    _events, done, server, tools = await run(
        api,
        [ScriptedReply(tool_calls=(call,)), reply(answer)],
        stream=stream,
        agent_options={"output_type": Forecast},
    )
    assert done.reason == "stop", done.error
    assert done.output == Forecast(city="Paris", temperature=21)
    assert done.to_dict()["output"] == {"city": "Paris", "temperature": 21}
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    for body in server.requests:  # asked for in every turn, beside the tools
        schema = asked_schema(api, body)
        assert set(schema["properties"]) == {"city", "temperature"}
        assert sorted(schema["required"]) == ["city", "temperature"]
    assert "get_weather" in sent_text(server, 1)
    assert done.messages[-1]["content"] == answer


@pytest.mark.parametrize("api", APIS)
async def test_an_answer_that_does_not_fit_goes_back_with_its_errors(api: str) -> None:
    _events, done, server, _tools = await run(
        api,
        [reply('{"city": "Paris"}'), reply('{"city": "Paris", "temperature": 21}')],
        agent_options={"output_type": Forecast},
    )
    assert done.reason == "stop", done.error
    assert done.output == Forecast(city="Paris", temperature=21)
    assert len(server.requests) == 2
    second = sent_text(server, 1)
    assert "does not fit the required output schema" in second
    assert "temperature: Field required" in second
    assert done.turns == 2


@pytest.mark.parametrize("api", APIS)
async def test_an_answer_that_never_fits_ends_the_run_with_output_invalid(api: str) -> None:
    _events, done, server, _tools = await run(
        api,
        [reply("It is sunny in Paris."), reply('{"city": "Paris", "temperature": "warm"}')],
        agent_options={"output_type": Forecast, "output_retries": 1},
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "output_invalid"
    assert "temperature" in done.error["message"]
    assert done.error["details"]["answer"] == '{"city": "Paris", "temperature": "warm"}'
    assert done.output is None
    assert len(server.requests) == 2


@pytest.mark.parametrize(("api", "stream"), CASES)
async def test_a_run_script_turn_calls_the_tools_and_sends_the_result_back(
    api: str, stream: bool, fleet: ToolManager, tmp_path: Path
) -> None:
    code = (
        "from agent_tools import call\n"
        "for sn in ('SN0001', 'SN0002'):\n"
        "    status = call('fleet__get_device_status', {'sn': sn})\n"
        "    print('status of', status['sn'])\n"
    )
    arguments = {"code": code, "tools": [], "description": "two statuses"}
    script_call = ScriptedToolCall(name="run_script", arguments=arguments, id="call_script1")
    async with ScriptedModel(
        [ScriptedReply(tool_calls=(script_call,)), reply("Both are known.")],
        api=api,  # type: ignore[arg-type]
    ) as server:
        agent = SAgent(model=server.chat_model(stream=stream))
        events = await collect(
            agent,
            USER,
            tool_manager=fleet,
            session_context=SessionContext(workspace=str(tmp_path / "ws")),
        )
    done = done_of(events)
    assert_settled_once(done.messages)
    assert done.reason == "stop", done.error
    assert "run_script" in sent_text(server, 0)  # offered in the API's own tool form
    (result,) = tool_messages(done.messages)
    assert result["tool_call_id"] == "call_script1"
    assert "status of SN0001" in result["content"]
    assert "status of SN0002" in result["content"]
    final = [e for e in events if isinstance(e, ScriptProgressEvent) and e.is_final]
    assert final
    assert final[-1].calls == 2
    second = sent_text(server, 1)
    assert "status of SN0001" in second  # the result went back in the API's own form
    assert "call_script1" in second
