"""The loop against hostile inputs: approvers that fail, endpoints that send garbage, servers
that stream parallel tool calls without distinct indices."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from openai import AsyncOpenAI

from sagents.agent import OpenAIChatModel, SAgent
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply
from sagents.tool import ApprovalAnswer, ApprovalRequest, ToolManager, tool
from tests.agent.helpers import assert_settled_once, collect, done_of, tool_messages

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hello"}]


@tool(permission="read_only")
async def get_weather(city: str) -> dict[str, Any]:
    """The weather of a city."""
    return {"city": city}


@tool(permission="write")
async def save(path: str) -> str:
    """Save a file."""
    return f"saved {path}"


def _manager() -> ToolManager:
    manager = ToolManager()
    manager.register_tool(get_weather)
    manager.register_tool(save)
    return manager


class BrokenApprover:
    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        raise RuntimeError("the approval UI crashed")


def _client(*bodies: tuple[str, bytes]) -> AsyncOpenAI:
    """An AsyncOpenAI whose requests get ``bodies`` in order (content type, body), in memory."""
    queue = list(bodies)

    def handler(request: httpx.Request) -> httpx.Response:
        content_type, body = queue.pop(0)
        return httpx.Response(200, headers={"content-type": content_type}, content=body)

    transport = httpx.MockTransport(handler)
    return AsyncOpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=transport),
    )


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chunk",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


_SSE = "text/event-stream"
_DONE = b"data: [DONE]\n\n"


async def test_an_approver_that_raises_denies_that_call_only_and_the_run_goes_on() -> None:
    calls = (
        ScriptedToolCall(name="save", arguments={"path": "a"}),
        ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}),
    )
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        events = await collect(agent, USER, tool_manager=_manager(), approver=BrokenApprover())
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    saved, weather = tool_messages(done.messages)
    assert "not_allowed" in saved["content"]
    assert "approver failed" in saved["content"]
    assert "Paris" in weather["content"]
    results = [e for e in events if isinstance(e, ApprovalResultEvent)]
    assert len([e for e in events if isinstance(e, ApprovalRequestEvent)]) == len(results) == 1
    assert not results[0].approved
    assert "the approval UI crashed" in (results[0].reason or "")


async def test_a_stream_with_invalid_json_ends_the_run_with_a_stream_error() -> None:
    model = OpenAIChatModel(model="m", client=_client((_SSE, b"data: {not json\n\n" + _DONE)))
    events = await collect(SAgent(model=model), USER)
    done = done_of(events)
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert list(done.messages) == USER


async def test_a_whole_answer_that_is_not_a_chat_completion_is_a_clear_error() -> None:
    html = ("text/html", b"<html>a login page of some proxy</html>")
    model = OpenAIChatModel(model="m", client=_client(html), stream=False)
    events = await collect(SAgent(model=model), USER)
    done = done_of(events)
    assert done.reason == "error"
    assert done.error is not None
    assert "not a chat completion" in done.error["message"]
    assert "login page" in done.error["message"]
    assert "/v1" in (done.error.get("hint") or "")
    assert list(done.messages) == USER


@pytest.mark.parametrize("city", ["A", "A\nraw"], ids=["json", "raw-newline-in-a-string"])
async def test_parallel_calls_streamed_at_one_index_with_their_own_ids_stay_apart(
    city: str,
) -> None:
    # a raw newline inside a string (llama-cpp-python's grammar lets one through) still makes
    # the first call's arguments whole: the next id starts a call of its own
    def call(call_id: str, city: str) -> dict[str, Any]:
        arguments = '{"city": "' + city + '"}'
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }

    first = (
        _chunk({"role": "assistant", "tool_calls": [{"index": 0, **call("a", city)}]})
        + _chunk({"tool_calls": [{"index": 0, **call("b", "B")}]})
        + _chunk({}, "tool_calls")
        + _DONE
    )
    second = _chunk({"content": "done"}, "stop") + _DONE
    model = OpenAIChatModel(model="m", client=_client((_SSE, first), (_SSE, second)))
    events = await collect(SAgent(model=model), USER, tool_manager=_manager())
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    calls = done.messages[1]["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
        ("a", '{"city": "' + city + '"}'),
        ("b", '{"city": "B"}'),
    ]
    assert ["A" in m["content"] for m in tool_messages(done.messages)] == [True, False]


async def test_argument_deltas_without_an_id_extend_the_call_of_their_index() -> None:
    first = (
        _chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_weather"}}]})
        + _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city"'}}]})
        + _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "A"}'}}]})
        + _chunk({}, "tool_calls")
        + _DONE
    )
    second = _chunk({"content": "done"}, "stop") + _DONE
    model = OpenAIChatModel(model="m", client=_client((_SSE, first), (_SSE, second)))
    done = done_of(await collect(SAgent(model=model), USER, tool_manager=_manager()))
    calls = done.messages[1]["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in calls] == [("a", '{"city": "A"}')]


def _assistant_calling(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


async def test_a_garbled_input_history_is_sent_as_a_valid_one() -> None:
    history: list[dict[str, Any]] = [
        _result("orphan", "a result whose call was cut off the history"),
        {"role": "user", "content": "earlier"},
        _assistant_calling("c1", "c2"),
        _result("c2", "second"),
        _result("stray", "answers no call of this message"),
        _result("c1", "first"),
        _result("c1", "first again"),
        {"role": "user", "content": "again"},
    ]
    async with ScriptedModel([reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, history, tool_manager=_manager()))
    sent = model.requests[0]["messages"]
    assert_settled_once(sent)
    assert_settled_once(done.messages)
    assert [m.get("content") for m in tool_messages(sent)] == ["first", "second"]
    assert sent[0] == {"role": "user", "content": "earlier"}


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ("hello", "messages[1]"),
        ({"role": "robot", "content": "x"}, "messages[1]: a chat message's role"),
        ({"role": "user", "content": 5}, "messages[1]: content"),
        ({"role": "assistant", "content": "", "tool_calls": "x"}, "messages[1]: tool_calls"),
        ({"role": "assistant", "content": "", "tool_calls": [5]}, "messages[1]: tool_calls"),
        ({"role": "assistant", "tool_calls": [{"function": "f"}]}, "messages[1]: tool_calls"),
    ],
    ids=["string", "role", "content", "calls-string", "call-number", "function-string"],
)
async def test_a_message_that_is_no_chat_message_is_refused_naming_it(bad: Any, where: str) -> None:
    # a history from a client (a web backend's request body): a clear ValueError naming the
    # message and what is wrong, before any event and before anything is sent, never an
    # AttributeError or TypeError from deep inside
    history = [{"role": "user", "content": "go"}, bad]
    async with ScriptedModel([reply("never")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        with pytest.raises(ValueError, match=r"^messages\[1\]") as caught:
            await collect(agent, history, tool_manager=_manager())
    assert where in str(caught.value)
    assert model.requests == []


async def test_an_empty_answer_enters_the_history_with_string_content() -> None:
    async with ScriptedModel([reply(""), reply("second")]) as model:
        agent = SAgent(model=model.chat_model())
        done = done_of(await collect(agent, USER))
        assert done.messages[-1] == {"role": "assistant", "content": ""}
        again = [*done.messages, {"role": "user", "content": "more"}]
        done_of(await collect(agent, again))
    assert model.requests[1]["messages"][1] == {"role": "assistant", "content": ""}


class HangingApprover:
    """An approver that never answers: it waits until the run is cancelled."""

    def __init__(self) -> None:
        self.asked = anyio.Event()

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_cancelling_while_the_approver_is_asked_still_sends_the_approval_result() -> None:
    approver = HangingApprover()
    calls = (ScriptedToolCall(name="save", arguments={"path": "a"}),)
    async with ScriptedModel([ScriptedReply(tool_calls=calls), reply("ok")]) as model:
        agent = SAgent(model=model.chat_model())
        async with anyio.create_task_group() as tg:

            async def cancel_when_asked() -> None:
                await approver.asked.wait()
                agent.cancel()

            tg.start_soon(cancel_when_asked)
            with anyio.fail_after(30):
                events = await collect(agent, USER, tool_manager=_manager(), approver=approver)
    done = done_of(events)
    assert done.reason == "cancelled"
    requests = [e for e in events if isinstance(e, ApprovalRequestEvent)]
    results = [e for e in events if isinstance(e, ApprovalResultEvent)]
    assert len(requests) == len(results) == 1
    assert results[0].request_id == requests[0].request_id
    assert not results[0].approved
    assert results[0].reason == "cancelled"
    assert events.index(results[0]) < events.index(done)


def _completion(choices: list[Any]) -> bytes:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": choices}
    return json.dumps(body).encode()


async def test_a_whole_answer_without_choices_is_a_clear_model_error() -> None:
    model = OpenAIChatModel(
        model="m", client=_client(("application/json", _completion([]))), stream=False
    )
    events = await collect(SAgent(model=model), USER)
    done = done_of(events)
    assert done.reason == "error"
    assert done.error is not None
    assert "no choices" in done.error["message"]
    assert list(done.messages) == USER


@pytest.mark.parametrize(
    "body",
    [
        _DONE,
        b"",
        b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}\n\n'
        + _DONE,
    ],
    ids=["done-only", "empty", "usage-only"],
)
async def test_a_stream_without_any_choice_is_a_clear_model_error(body: bytes) -> None:
    model = OpenAIChatModel(model="m", client=_client((_SSE, body)))
    events = await collect(SAgent(model=model), USER)
    done = done_of(events)
    assert done.reason == "error"
    assert done.error is not None
    assert "no choices" in done.error["message"]
    assert list(done.messages) == USER


@pytest.mark.parametrize("permission", ["read_only", "write"])
async def test_tool_call_arguments_nested_100000_deep_end_the_run_with_done(
    permission: str,
) -> None:
    deep = '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}"
    name = "get_weather" if permission == "read_only" else "save"
    replies = [
        ScriptedReply(tool_calls=(ScriptedToolCall(name=name, arguments=deep),)),
        reply("ok"),
    ]
    async with ScriptedModel(replies) as model:
        agent = SAgent(model=model.chat_model())
        events = await collect(agent, USER, tool_manager=_manager(), approver=BrokenApprover())
    done = done_of(events)
    assert_settled_once(done.messages)
    (result,) = tool_messages(done.messages)
    assert "invalid_arguments" in result["content"]
    assert "nested too deeply" in result["content"]
