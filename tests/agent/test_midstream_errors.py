"""What OpenAI-compatible servers send inside a 200 stream when the answer fails, replayed
through the real ``openai`` client (docs/agent.md, "Servers' quirks").

Once a server has answered HTTP 200 it can no longer say a failure in the status line:
OpenRouter, LiteLLM's proxy, vLLM and OpenAI itself send an ``{"error": {...}}`` data event
instead, some with the status it would have had as its ``code``. Such an error is read as that
status would be: a transient one is retried while nothing of the answer was passed on, one that
sending again cannot cure (a refused request, a prompt past the context window, no credit left)
is its own clear error at once. Also here: chunks whose ``choices`` are null or absent. Each
fixture in ``tests/agent/wire/`` names the reports it was written from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from sagents.agent import (
    AgentEvent,
    CompressionSettings,
    DoneEvent,
    HistoryCompressEvent,
    MessageDeltaEvent,
    ReasoningDeltaEvent,
    SAgent,
    UsageEvent,
)
from sagents.testing import ScriptedModel, ScriptedReply, WireReply, http_error, load_wire
from tests.agent.helpers import assert_settled_once, collect, done_of

pytestmark = pytest.mark.anyio

WIRE = Path(__file__).parent / "wire"
USER = [{"role": "user", "content": "go"}]
LONG = [
    {"role": "user", "content": "the task: summarise the logs"},
    {"role": "assistant", "content": "Reading. " * 40},
    {"role": "user", "content": "now write it up"},
]


def wire(name: str) -> list[WireReply]:
    return load_wire(WIRE / f"{name}.json")


async def run(
    script: Sequence[ScriptedReply | WireReply | str],
    *,
    messages: Sequence[Mapping[str, Any]] = USER,
    **agent_options: Any,
) -> tuple[list[AgentEvent], DoneEvent, ScriptedModel]:
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(max_retry_wait=5), run_script=False, **agent_options)
        events = await collect(agent, messages)
    done = done_of(events)
    assert_settled_once(done.messages)
    return events, done, model


async def test_an_openrouter_error_after_text_is_a_broken_stream_naming_the_servers_error() -> None:
    """https://openrouter.ai/docs/api-reference/errors-and-debugging: the provider went away
    after text was passed on (code 502, ``finish_reason: "error"``): never an answer, and the
    error says what the server said."""
    events, done, model = await run([*wire("openrouter_midstream_error"), "never"])
    assert [e.delta for e in events if isinstance(e, MessageDeltaEvent)] == ["Let me check"]
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert "Provider disconnected unexpectedly" in done.error["message"]
    assert list(done.messages) == USER
    assert len(model.requests) == 1


async def test_an_openai_server_error_before_anything_is_retried() -> None:
    """https://github.com/block/goose/pull/8031: ``{"error": {"type": "server_error"}}`` as
    the stream's first event is transient; the next request is answered."""
    _events, done, model = await run([*wire("openai_midstream_server_error"), "answered"])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "answered"
    assert len(model.requests) == 2


async def test_a_litellm_rate_limit_in_the_stream_is_retried() -> None:
    """https://github.com/BerriAI/litellm/issues/9035: the upstream's 429 arrives in the body
    of a 200 stream (``code: "429"``); it is retried as a 429 is."""
    _events, done, model = await run([wire("litellm_midstream_errors")[2], "answered"])
    assert done.reason == "stop"
    assert len(model.requests) == 2


async def test_a_refused_request_in_the_stream_is_not_retried() -> None:
    """https://github.com/BerriAI/litellm/issues/9035: the upstream's 400 (``code: "400"``)
    inside a 200 stream: sending the same request again fails again, so it is one clear
    ``model_error`` saying the request was refused, not a broken stream retried."""
    refused = wire("litellm_midstream_errors")[1]
    _events, done, model = await run([refused, refused, refused, "never"])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_error"
    assert "rejected the request" in done.error["message"]
    assert "Input should be a valid dictionary" in done.error["message"]
    assert "try again later" not in done.error["hint"]
    assert len(model.requests) == 1


async def test_a_context_window_error_in_the_stream_compresses_and_retries_once(
    tmp_path: Path,
) -> None:
    """https://github.com/BerriAI/litellm/issues/9035 with LiteLLM's ContextWindowExceededError
    (https://github.com/OpenHands/OpenHands/issues/5350) inside a 200 stream: it is
    ``context_length_exceeded``, so the history is compressed and sent once more."""
    events, done, model = await run(
        [wire("litellm_midstream_errors")[0], "SUMMARY", "the write-up"],
        messages=LONG,
        max_history_tokens=100_000,
        compression=CompressionSettings(keep_recent_tokens=5, records_dir=tmp_path),
    )
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "the write-up"
    assert [e.reason for e in events if isinstance(e, HistoryCompressEvent)] == ["context_length"]
    assert len(model.requests) == 3


async def test_a_context_window_error_in_the_stream_without_compression_is_not_retried() -> None:
    """The same refusal without automatic compression: ``context_length_exceeded`` at once."""
    refused = wire("litellm_midstream_errors")[0]
    _events, done, model = await run([refused, refused, "never"], messages=LONG)
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "context_length_exceeded"
    assert len(model.requests) == 1


async def test_no_credit_left_is_a_quota_error_not_retried() -> None:
    """https://openrouter.ai/docs/api-reference/errors-and-debugging: HTTP 402, "Your account
    or API key has insufficient credits" (DeepSeek's 402 is "Insufficient Balance"): waiting does
    not help, so it is ``model_quota_exhausted`` at once, not a refused request."""
    no_credit = http_error(
        402, "Insufficient credits. Add more using https://openrouter.ai/credits"
    )
    _events, done, model = await run([no_credit, no_credit, "never"])
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_quota_exhausted"
    assert "credit" in done.error["hint"]
    assert len(model.requests) == 1


async def test_chunks_whose_choices_are_null_or_absent_are_skipped() -> None:
    """https://github.com/pydantic/pydantic-ai/issues/5165 (a chunk with ``choices: null`` in
    a healthy stream) and https://github.com/ROCm/ATOM/pull/1711 (a usage chunk without
    ``choices``): neither is a piece of the answer, nor a bug below the loop."""
    events, done, _model = await run(wire("choices_null_chunks"))
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "Sunny today."
    assert [e.delta for e in events if isinstance(e, MessageDeltaEvent)] == ["Sunny", " today."]
    usage = [e for e in events if isinstance(e, UsageEvent)]
    assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [(12, 3)]


async def test_a_stream_the_engine_aborted_after_text_is_never_the_answer() -> None:
    """https://github.com/vllm-project/vllm/issues/57082: vLLM ends a request its engine
    aborted with ``finish_reason: "abort"`` and ``data: [DONE]``, as if it had finished; the
    text before it is cut, so it is ``model_stream_broken``, not the final answer."""
    events, done, model = await run([wire("vllm_engine_abort")[0], "never"])
    assert [e.delta for e in events if isinstance(e, MessageDeltaEvent)] == [
        "One, two, three,",
        " four",
    ]
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert "abort" in done.error["message"]
    assert list(done.messages) == USER
    assert len(model.requests) == 1


async def test_a_whole_answer_the_engine_aborted_is_asked_again() -> None:
    """The same abort in a whole answer: nothing of it was passed on, so it is asked again."""
    async with ScriptedModel([wire("vllm_engine_abort")[1], "all of it"]) as model:
        agent = SAgent(model=model.chat_model(stream=False), run_script=False)
        events = await collect(agent, USER)
    done = done_of(events)
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "all of it"
    assert [e.delta for e in events if isinstance(e, MessageDeltaEvent)] == ["all of it"]
    assert len(model.requests) == 2


@pytest.mark.parametrize("form", [0, 1], ids=["in-the-stream", "http-400"])
async def test_groqs_tool_use_failed_is_asked_again(form: int) -> None:
    """https://github.com/anomalyco/opencode/issues/1018 and
    https://github.com/groq/groq-typescript/issues/28: Groq answers ``tool_use_failed`` (type
    ``invalid_request_error``, status 400) when the model wrote a tool call it could not parse,
    intermittently: the same request usually succeeds, so it is asked again, not refused as a
    request that would fail the same way."""
    failed = wire("groq_tool_use_failed")[form]
    _events, done, model = await run([failed, "answered"])
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "answered"
    assert len(model.requests) == 2


async def test_groqs_tool_use_failed_every_time_is_a_clear_error() -> None:
    failed = wire("groq_tool_use_failed")[1]
    async with ScriptedModel([failed, failed]) as model:
        agent = SAgent(model=model.chat_model(max_retries=1), run_script=False)
        done = done_of(await collect(agent, USER))
    assert done.reason == "error"
    assert done.error is not None
    assert "Failed to call a function" in done.error["message"]
    assert "try again later" not in done.error["hint"]
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("reply", "code"),
    [(0, "context_length_exceeded"), (1, "model_error")],
    ids=["context-window", "refused"],
)
async def test_the_responses_adapter_reads_an_error_in_the_stream_as_its_status(
    reply: int, code: str
) -> None:
    """The same LiteLLM errors (https://github.com/BerriAI/litellm/issues/9035) on the
    Responses API, where the proxy sent them as the same ``data: {"error": ...}`` event:
    not retried as a broken stream."""
    failed = wire("litellm_midstream_errors")[reply]
    async with ScriptedModel([failed, failed, failed, "never"], api="responses") as model:
        agent = SAgent(model=model.chat_model(max_retry_wait=5), run_script=False)
        done = done_of(await collect(agent, USER))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == code
    assert len(model.requests) == 1


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_mistral_content_as_a_list_of_thinking_and_text_chunks(stream: bool) -> None:
    """https://github.com/BerriAI/litellm/issues/16272: Mistral's magistral models send
    ``content`` as a list of chunks, ``thinking`` ones then ``text`` ones, streamed and whole.
    The text is the answer, the thinking passes as reasoning, and the message goes back with a
    string content and no ``reasoning_content`` (Mistral refuses it: 422 extra_forbidden,
    https://github.com/BerriAI/litellm/issues/30835)."""
    recorded = wire("mistral_magistral_content_chunks")[0 if stream else 1]
    async with ScriptedModel([recorded, "fine"]) as model:
        agent = SAgent(model=model.chat_model(stream=stream), run_script=False)
        events = await collect(agent, [{"role": "user", "content": "hello"}])
        done = done_of(events)
        assert done.reason == "stop", done.error
        assert done.messages[-1] == {"role": "assistant", "content": "Hello! How can I help?"}
        await collect(agent, [*done.messages, {"role": "user", "content": "thanks"}])
    thought = "".join(e.delta for e in events if isinstance(e, ReasoningDeltaEvent))
    assert thought == "Okay, the user says hello, it's a greeting"
    answer = "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent))
    assert answer == "Hello! How can I help?"
    assert model.requests[1]["messages"][1] == {
        "role": "assistant",
        "content": "Hello! How can I help?",
    }
