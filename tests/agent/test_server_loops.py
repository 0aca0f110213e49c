"""The loop cases on every recorded server's tool-call answer.

``test_conformance.py`` runs the loop cases on each adapter with answers ``ScriptedModel``
writes; here the same cases run on the tool-call answers recorded from (or written after) each
real server in ``tests/agent/wire/`` (vLLM, Ollama, LiteLLM, LM Studio, Mistral, DeepSeek,
llama-cpp-python, Anthropic, Gemini, OpenAI Responses), through the adapter of that API and its
official SDK: the calls denied by the person, ``max_turns`` reached on that answer, and the run
cancelled in the middle of the streamed call. The tool turn itself and parallel calls are each
fixture's own test (``test_servers.py``, ``test_anthropic.py``, ``test_gemini.py``,
``test_responses.py``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx2 as httpx
import pytest
from openai import AsyncOpenAI

from sagents.agent import (
    ChatModel,
    ModelEvent,
    ModelRequest,
    OpenAIChatModel,
    SAgent,
    ToolCallArgumentsDelta,
    ToolCallStart,
)
from sagents.agent._events import AgentEvent, DoneEvent
from sagents.core.events import ApprovalResultEvent
from sagents.testing import ScriptedModel, WireReply
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import assert_settled_once, collect, done_of, tool_messages
from tests.agent.test_servers import USER, Deny, Tools, wire

pytestmark = pytest.mark.anyio

# (fixture, API): the fixture's first reply is a tool-call answer of that API
RECORDED = [
    ("vllm_named_tool_finish_stop", "chat"),
    ("ollama_parallel_calls_index_zero", "chat"),
    ("ollama_tool_calls_without_index", "chat"),
    ("litellm_ollama_chat_object_arguments", "chat"),
    ("litellm_id_on_every_fragment", "chat"),
    ("lmstudio_arguments_in_one_chunk", "chat"),
    ("mistral_whole_call_nine_char_id", "chat"),
    ("deepseek_reasoning_tool_call", "chat"),
    ("llama_cpp_python_named_tool_stream", "chat"),
    ("llama_cpp_python_real_named_tool_stream", "chat"),
    ("llama_cpp_python_real_named_tool_whole", "chat"),
    ("anthropic_parallel_tool_use", "anthropic"),
    ("anthropic_thinking_tool_use", "anthropic"),
    ("gemini_thought_signature_parallel_calls", "gemini"),
    ("responses_reasoning_tool_call", "responses"),
]
CASES = [pytest.param(name, api, id=name) for name, api in RECORDED]
TOOL_NAMES = ("get_weather", "save")


def answer_of(name: str) -> WireReply:
    """The fixture's tool-call answer (its first reply)."""
    return wire(name)[0]


def streamed(reply: WireReply) -> bool:
    return reply.headers.get("content-type", "text/event-stream").startswith("text/event-stream")


def calls_in(done: DoneEvent) -> list[tuple[str, str]]:
    """The (id, name) of each call of the run's one assistant answer with calls."""
    (answer,) = [m for m in done.messages if m.get("tool_calls")]
    return [(c["id"], c["function"]["name"]) for c in answer["tool_calls"]]


def all_write() -> ToolManager:
    """``get_weather`` and ``save`` both as write tools: a session in ``ask`` mode asks for
    every recorded call. Neither may run."""

    @tool(permission="write")
    async def get_weather(city: str) -> str:
        """The weather of a city."""
        raise AssertionError("a denied call ran")

    @tool(permission="write")
    async def save(path: str, text: str = "") -> str:
        """Save a file."""
        raise AssertionError("a denied call ran")

    manager = ToolManager()
    manager.register_tool(get_weather)
    manager.register_tool(save)
    return manager


async def run(
    name: str, api: str, tool_manager: ToolManager, **options: Any
) -> tuple[list[AgentEvent], DoneEvent, ScriptedModel]:
    reply = answer_of(name)
    max_turns = options.pop("max_turns", 10)
    async with ScriptedModel([reply, "ok"], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(stream=streamed(reply)),
            run_script=False,
            max_turns=max_turns,
        )
        events = await collect(agent, USER, tool_manager=tool_manager, **options)
    done = done_of(events)
    assert_settled_once(done.messages)
    return events, done, server


@pytest.mark.parametrize(("name", "api"), CASES)
async def test_every_call_of_a_recorded_answer_denied_runs_none_and_the_run_goes_on(
    name: str, api: str
) -> None:
    deny = Deny()
    events, done, server = await run(
        name,
        api,
        all_write(),
        session_context=SessionContext(permission_mode="ask"),
        approver=deny,
    )
    assert done.reason == "stop", done.error
    calls = calls_in(done)
    assert calls
    asked = sorted((r.tool_call_id or "", r.tools) for r in deny.requests)
    assert asked == sorted((i, (n,)) for i, n in calls)  # each call asked once
    approved = [e.approved for e in events if isinstance(e, ApprovalResultEvent)]
    assert approved == [False] * len(calls)
    results = tool_messages(done.messages)
    assert [r["tool_call_id"] for r in results] == [i for i, _ in calls]
    assert all("denied by the user" in r["content"] for r in results)
    assert len(server.requests) == 2
    assert "denied by the user" in json.dumps(server.requests[1])  # in the API's own form
    assert done.messages[-1]["content"] == "ok"


@pytest.mark.parametrize(("name", "api"), CASES)
async def test_max_turns_on_a_recorded_answer_runs_each_call_once_and_ends(
    name: str, api: str
) -> None:
    tools = Tools()
    _events, done, server = await run(
        name,
        api,
        tools.manager(),
        session_context=SessionContext(permission_mode="auto"),
        max_turns=1,
    )
    assert done.reason == "max_turns"
    calls = calls_in(done)
    assert sorted(n for n, _arguments in tools.calls) == sorted(n for _i, n in calls)
    assert len(server.requests) == 1


class CancelAtFirstCall:
    """The adapter of the scripted server, cancelling the agent at the first piece of a call it
    passes on (the run is then in the middle of a streamed tool call)."""

    def __init__(self, inner: ChatModel, agent: list[SAgent]) -> None:
        self.inner = inner
        self.model = inner.model
        self._agent = agent
        self.cancelled = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for event in self.inner.stream(request):
            if isinstance(event, ToolCallStart | ToolCallArgumentsDelta) and not self.cancelled:
                self.cancelled = True
                self._agent[0].cancel()
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


class CancelAtFirstCallBytes(httpx.AsyncBaseTransport):
    """An HTTP transport cancelling the agent once the answer's bytes name a tool: the Chat
    Completions adapter passes calls on only once the answer is whole, so the middle of a
    streamed call is seen below it."""

    def __init__(self, agent: list[SAgent]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self._agent = agent
        self.cancelled = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.inner.handle_async_request(request)
        return httpx.Response(
            answer.status_code, headers=answer.headers, stream=_Watched(self, answer)
        )

    def seen(self, chunk: bytes) -> None:
        if not self.cancelled and any(f'"{n}"'.encode() in chunk for n in TOOL_NAMES):
            self.cancelled = True
            self._agent[0].cancel()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Watched(httpx.AsyncByteStream):
    def __init__(self, transport: CancelAtFirstCallBytes, answer: httpx.Response) -> None:
        self._transport = transport
        self._answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._answer.aiter_raw():
            self._transport.seen(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._answer.aclose()


def cut_after_first_call(reply: WireReply) -> WireReply:
    """The recorded stream up to its first piece naming a tool, then nothing more (the
    connection stays open)."""
    first = next(
        index
        for index, piece in enumerate(reply.body)
        if any(f'"{n}"' in piece for n in TOOL_NAMES)
    )
    return dataclasses.replace(reply, body=reply.body[: first + 1], end="hang")


STREAMED = [param for param in CASES if streamed(answer_of(str(param.values[0])))]


@pytest.mark.parametrize(("name", "api"), STREAMED)
async def test_a_run_cancelled_in_the_middle_of_a_recorded_streamed_call_runs_nothing(
    name: str, api: str
) -> None:
    tools = Tools()
    agents: list[SAgent] = []
    watch: CancelAtFirstCall | CancelAtFirstCallBytes
    model: ChatModel
    cut = cut_after_first_call(answer_of(name))
    async with ScriptedModel([cut], api=api) as server, AsyncExitStack() as stack:  # type: ignore[arg-type]
        if api == "chat":
            watch = CancelAtFirstCallBytes(agents)
            http = await stack.enter_async_context(httpx.AsyncClient(transport=watch))
            client = AsyncOpenAI(
                base_url=server.base_url, api_key="k", http_client=http, max_retries=0
            )
            model = OpenAIChatModel("m", client=client)
        else:
            model = watch = CancelAtFirstCall(server.chat_model(), agents)
        agents.append(SAgent(model=model, run_script=False))
        events = await collect(
            agents[0],
            USER,
            tool_manager=tools.manager(),
            session_context=SessionContext(permission_mode="auto"),
        )
    done = done_of(events)
    assert watch.cancelled
    assert done.reason == "cancelled"
    assert list(done.messages) == USER
    assert not tools.calls
