"""What real servers send, replayed through the real ``openai`` client.

Each fixture in ``tests/agent/wire/`` is one server's documented or reported wire behaviour (the
file names its sources), played back byte for byte by ``ScriptedModel`` on 127.0.0.1
(``WireReply``); the agent loop runs against it as against the real server. docs/agent.md,
"Servers' quirks", lists each behaviour and what sagents does.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from sagents.agent import (
    CompressionSettings,
    HistoryCompressEvent,
    MessageDeltaEvent,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ReasoningDeltaEvent,
    SAgent,
    UsageEvent,
)
from sagents.agent._events import AgentEvent, DoneEvent
from sagents.core.events import ApprovalRequestEvent, ApprovalResultEvent, ScriptProgressEvent
from sagents.testing import (
    ReplyFunction,
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
    http_error,
    load_wire,
)
from sagents.tool import (
    AllowAllApprover,
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    SessionContext,
    ToolManager,
    tool,
)
from tests.agent.helpers import (
    assert_settled_once,
    collect,
    collect_cancelling_at_first_text,
    done_of,
    tool_messages,
)

pytestmark = pytest.mark.anyio

WIRE = Path(__file__).parent / "wire"
USER = [{"role": "user", "content": "go"}]
AUTO = SessionContext(permission_mode="auto")
NINE_ALNUM = re.compile(r"[a-zA-Z0-9]{9}")


def wire(name: str) -> list[WireReply]:
    return load_wire(WIRE / f"{name}.json")


class Tools:
    """``get_weather`` and ``save``, recording each call they get."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def manager(self) -> ToolManager:
        @tool(permission="read_only")
        async def get_weather(city: str) -> str:
            """The weather of a city."""
            self.calls.append(("get_weather", {"city": city}))
            return f"sunny in {city}"

        @tool(permission="write")
        async def save(path: str, text: str = "") -> str:
            """Save a file."""
            self.calls.append(("save", {"path": path}))
            return f"saved {path}"

        manager = ToolManager()
        manager.register_tool(get_weather)
        manager.register_tool(save)
        return manager


async def run(
    script: Sequence[ScriptedReply | WireReply | str | ReplyFunction] | ReplyFunction,
    *,
    messages: Sequence[Mapping[str, Any]] = USER,
    model_options: Mapping[str, Any] | None = None,
    context: SessionContext = AUTO,
    approver: Approver | None = None,
    **agent_options: Any,
) -> tuple[list[AgentEvent], DoneEvent, ScriptedModel, Tools]:
    tools = Tools()
    async with ScriptedModel(script) as model:
        agent = SAgent(
            model=model.chat_model(**(model_options or {})), run_script=False, **agent_options
        )
        events = await collect(
            agent,
            messages,
            tool_manager=tools.manager(),
            session_context=context,
            approver=approver,
        )
    done = done_of(events)
    assert_settled_once(done.messages)
    return events, done, model, tools


class Deny:
    """An approver that denies every call, keeping what it was asked."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return "deny"


def named(tool_name: str) -> dict[str, Any]:
    """A Chat Completions ``tool_choice`` naming ``tool_name``."""
    return {"type": "function", "function": {"name": tool_name}}


def calls_of(message: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or []
    ]


def sent_assistant(model: ScriptedModel, request: int) -> dict[str, Any]:
    """The assistant message of request ``request`` (its last one)."""
    assistants = [m for m in model.requests[request]["messages"] if m["role"] == "assistant"]
    return dict(assistants[-1])


# -- tool-call fragments ------------------------------------------------------------------------


async def test_llama_cpp_python_repeats_id_and_name_and_hides_a_piece_in_function_call() -> None:
    _events, done, model, tools = await run(wire("llama_cpp_python_named_tool_stream"))
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "It is sunny in Paris."
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    call_id = "call__0_get_weather_cmpl-3f1c"
    assert calls_of(done.messages[1]) == [(call_id, "get_weather", '{"city": "Paris"}')]
    # sent back as the server's request model accepts it: content a string, never null
    sent = sent_assistant(model, 1)
    assert sent["content"] == ""
    assert calls_of(sent) == [(call_id, "get_weather", '{"city": "Paris"}')]


async def test_a_null_content_would_get_a_500_from_llama_cpp_python_so_none_is_sent() -> None:
    replies = iter(wire("llama_cpp_python_named_tool_stream"))
    (refusal,) = wire("llama_cpp_python_null_content_500")

    def server(body: dict[str, Any]) -> WireReply:
        if any(m.get("content") is None for m in body["messages"]):
            return refusal  # as the real server: its request model types content as a string
        return next(replies)

    _events, done, model, _tools = await run(server)
    assert done.reason == "stop", done.error
    assert len(model.requests) == 2
    assert all(isinstance(m["content"], str) for m in model.requests[1]["messages"])


async def test_an_input_history_with_null_content_is_sent_with_strings() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "k1", "function": {"name": "get_weather", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "k1", "content": "sunny"},
        {"role": "user", "content": "and now?"},
    ]
    _events, done, model, _tools = await run(["fine"], messages=history)
    assert done.reason == "stop"
    sent = model.requests[0]["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["", ""]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_a_validation_500_is_not_retried_and_does_not_say_try_again_later() -> None:
    _events, done, model, _tools = await run(
        wire("llama_cpp_python_null_content_500") * 4, model_options={"max_retries": 3}
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_error"
    assert "rejected the request (HTTP 500)" in done.error["message"]
    assert "Input should be a valid string" in done.error["message"]
    assert "try again later" not in (done.error.get("hint") or "")
    assert len(model.requests) == 1


async def test_a_500_for_a_tool_choice_the_server_cannot_match_is_not_retried() -> None:
    # recorded from the real server: a tool_choice naming a function that is not in tools
    refused = wire("llama_cpp_python_real_unknown_tool_choice_500")
    _events, done, model, tools = await run(refused * 4, model_options={"max_retries": 3})
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_error"
    assert "rejected the request (HTTP 500)" in done.error["message"]
    assert "Tool with name 'fleet__get_device_status' not found in tools" in done.error["message"]
    assert "try again later" not in (done.error.get("hint") or "")
    assert len(model.requests) == 1
    assert not tools.calls


@pytest.mark.parametrize("choice", ["fleet__get_device_status", "save"])
async def test_a_named_tool_choice_that_is_not_offered_ends_the_run_before_any_request(
    choice: str,
) -> None:
    # "save" is a write tool: a read-only session is not offered it
    _events, done, model, tools = await run(
        ["never"],
        model_settings=ModelSettings(tool_choice=choice),
        context=SessionContext(permission_mode="read_only"),
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_not_configured"
    assert f"tool_choice {choice!r}" in done.error["message"]
    assert "get_weather" in done.error["message"]  # what is offered
    assert "auto" in (done.error.get("hint") or "")
    assert not model.requests
    assert not tools.calls


async def test_a_named_tool_choice_forces_one_call_then_the_model_may_answer() -> None:
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_paris1")
    _events, done, model, tools = await run(
        [ScriptedReply(tool_calls=(call,)), "Sunny."],
        model_settings=ModelSettings(tool_choice="get_weather"),
    )
    assert done.reason == "stop"
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    assert model.requests[0]["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    assert "tool_choice" not in model.requests[1]  # called once: the model may answer now


async def test_tool_choice_required_forces_one_answer_with_calls_then_the_model_may_answer() -> (
    None
):
    # "required" sent in every call makes every answer a tool call: a model can never answer,
    # and the run spends max_turns (the OpenAI Agents SDK's reset_tool_choice resets it too)
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_paris1")
    _events, done, model, tools = await run(
        [ScriptedReply(tool_calls=(call,)), "Sunny."],
        model_settings=ModelSettings(tool_choice="required"),
    )
    assert done.reason == "stop"
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    assert model.requests[0]["tool_choice"] == "required"
    assert "tool_choice" not in model.requests[1]


async def test_llama_cpp_python_empty_streamed_body_is_an_error_naming_no_stream() -> None:
    _events, done, _model, tools = await run(wire("llama_cpp_python_auto_stream_empty"))
    assert done.reason == "error"
    assert done.error is not None
    assert "no choices" in done.error["message"]
    hint = done.error.get("hint") or ""
    assert "stream=False" in hint
    assert "--no-stream" in hint
    assert not tools.calls


# -- recorded from the real llama-cpp-python server (scripts/record_llama_cpp_wire.py) ---------


@pytest.mark.parametrize("form", ["stream", "whole"])
async def test_real_llama_cpp_python_named_tool_round_trip(form: str) -> None:
    script = [
        *wire(f"llama_cpp_python_real_named_tool_{form}"),
        *wire(f"llama_cpp_python_real_text_after_result_{form}"),
    ]
    _events, done, model, tools = await run(
        script,
        model_options={"stream": form == "stream"},
        model_settings=ModelSettings(tool_choice="get_weather"),
    )
    assert done.reason == "stop", done.error
    assert tools.calls == [("get_weather", {"city": "Paris"})]  # once, whole arguments
    sent = sent_assistant(model, 1)
    ((call_id, name, arguments),) = calls_of(sent)
    assert call_id.startswith("call__0_get_weather_cmpl-")  # the server's id, kept
    assert (name, json.loads(arguments)) == ("get_weather", {"city": "Paris"})
    assert sent["content"] == ""
    assert model.requests[1]["messages"][-1]["tool_call_id"] == call_id
    assert done.messages[-1] == {"role": "assistant", "content": ""}  # what the model said


@pytest.mark.parametrize("form", ["stream", "whole"])
async def test_real_llama_cpp_python_tool_call_at_max_turns_runs_once_and_ends(form: str) -> None:
    _events, done, model, tools = await run(
        wire(f"llama_cpp_python_real_named_tool_{form}"),
        model_options={"stream": form == "stream"},
        model_settings=ModelSettings(tool_choice="get_weather"),
        max_turns=1,
    )
    assert done.reason == "max_turns"
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    assert [m["role"] for m in done.messages] == ["user", "assistant", "tool"]
    assert len(model.requests) == 1


async def test_real_llama_cpp_python_stream_cancelled_mid_answer_leaves_no_partial_message() -> (
    None
):
    (whole,) = wire("llama_cpp_python_real_text_stream")
    # the recorded stream's first four events (a role chunk, three words), then nothing more
    stalled = dataclasses.replace(whole, body=whole.body[:4], end="hang")
    async with ScriptedModel([stalled]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        events = await collect_cancelling_at_first_text(agent, USER, tool_manager=Tools().manager())
    done = done_of(events)
    assert done.reason == "cancelled"
    assert list(done.messages) == USER


@pytest.mark.parametrize("form", ["stream", "whole"])
async def test_real_llama_cpp_python_text_answer(form: str) -> None:
    events, done, _model, tools = await run(
        wire(f"llama_cpp_python_real_text_{form}"), model_options={"stream": form == "stream"}
    )
    assert done.reason == "stop", done.error
    said = "Say hello to Paris in one short sentence."
    assert "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent)) == said
    assert done.messages[-1] == {"role": "assistant", "content": said}
    assert not tools.calls
    if form == "whole":  # the streamed answer reports no usage
        usage = [e for e in events if isinstance(e, UsageEvent)]
        assert [(u.prompt_tokens > 0, u.completion_tokens > 0) for u in usage] == [(True, True)]


async def test_real_llama_cpp_python_auto_stream_with_only_pings_is_an_error_naming_no_stream() -> (
    None
):
    _events, done, _model, tools = await run(wire("llama_cpp_python_real_auto_stream") * 4)
    assert done.reason == "error"
    assert done.error is not None
    assert "no choices" in done.error["message"]
    assert "--no-stream" in (done.error.get("hint") or "")
    assert not tools.calls


@pytest.mark.parametrize("form", ["stream", "whole"])
async def test_real_llama_cpp_python_write_call_denied_never_runs_and_the_model_answers_after(
    form: str,
) -> None:
    deny = Deny()
    events, done, model, tools = await run(
        wire(f"llama_cpp_python_real_write_denied_{form}"),
        model_options={"stream": form == "stream"},
        model_settings=ModelSettings(tool_choice="save"),
        context=SessionContext(permission_mode="ask"),
        approver=deny,
    )
    assert done.reason == "stop", done.error
    assert not tools.calls
    ((call_id, name, arguments),) = calls_of(done.messages[1])
    assert call_id.startswith("call__0_save_cmpl-")  # the server's id, kept
    assert (name, json.loads(arguments)) == (
        "save",
        {"path": "notes.txt", "text": "Hello, this is my file notes.txt"},
    )
    assert [(r.tools, r.tool_call_id) for r in deny.requests] == [(("save",), call_id)]
    assert [e.approved for e in events if isinstance(e, ApprovalResultEvent)] == [False]
    (denied,) = tool_messages(done.messages)
    assert denied["tool_call_id"] == call_id
    assert "the call of 'save' was denied by the user" in denied["content"]
    assert model.requests[0]["tool_choice"] == named("save")
    assert "tool_choice" not in model.requests[1]  # called (and denied): the model may answer
    assert model.requests[1]["messages"][-1] == denied
    assert sent_assistant(model, 1)["content"] == ""
    assert done.messages[-1] == {"role": "assistant", "content": ""}  # what the model said


@pytest.mark.parametrize("form", ["stream", "whole"])
@pytest.mark.parametrize(
    ("recording", "error"),
    [
        ("run_script", "tool 'device_name' is not available to scripts in this session"),
        ("run_script_print", "SyntaxError: invalid"),
    ],
    ids=["undeclared-tool", "raw-newline-in-arguments"],
)
async def test_real_llama_cpp_python_run_script_call_that_cannot_run_goes_back_as_its_error(
    fleet: ToolManager, tmp_path: Path, form: str, recording: str, error: str
) -> None:
    # what Gemma 3 270M really sent when tool_choice named run_script: a script that declares a
    # tool the session does not have; and arguments with a raw newline inside a JSON string
    # (read as the model meant them: the script itself, "python3.5", is what cannot run)
    async with ScriptedModel(wire(f"llama_cpp_python_real_{recording}_{form}")) as model:
        agent = SAgent(
            model=model.chat_model(stream=form == "stream"),
            model_settings=ModelSettings(tool_choice="run_script"),
        )
        events = await collect(
            agent,
            USER,
            tool_manager=fleet,
            session_context=SessionContext(workspace=str(tmp_path / "ws"), permission_mode="auto"),
        )
    done = done_of(events)
    assert_settled_once(done.messages)
    assert done.reason == "stop", done.error
    assert model.requests[0]["tool_choice"] == named("run_script")
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "run_script" in offered
    assert "fleet__get_device_status" in offered
    ((call_id, name, _arguments),) = calls_of(done.messages[1])
    assert (call_id.startswith("call__0_run_script_cmpl-"), name) == (True, "run_script")
    (result,) = tool_messages(done.messages)
    assert result["tool_call_id"] == call_id
    assert error in result["content"], result["content"]
    assert "invalid_arguments" not in result["content"]
    assert not any(isinstance(e, ScriptProgressEvent) and e.calls for e in events)  # none ran
    assert "tool_choice" not in model.requests[1]
    assert model.requests[1]["messages"][-1] == result
    assert done.messages[-1] == {"role": "assistant", "content": ""}


async def test_vllm_named_tool_call_ending_with_finish_stop_is_still_run() -> None:
    _events, done, _model, tools = await run([*wire("vllm_named_tool_finish_stop"), "done"])
    assert done.reason == "stop"
    assert tools.calls == [("get_weather", {"city": "Lyon"})]
    assert calls_of(done.messages[1]) == [
        ("chatcmpl-tool-5b1f0e2c", "get_weather", '{"city": "Lyon"}')
    ]


async def test_ollama_parallel_calls_all_at_index_zero_stay_apart() -> None:
    _events, done, _model, tools = await run([*wire("ollama_parallel_calls_index_zero"), "ok"])
    assert done.reason == "stop"
    assert calls_of(done.messages[1]) == [
        ("call_x1d2pq7r", "save", '{"path":"hello.py"}'),
        ("call_k9w3mz0a", "save", '{"path":"world.py"}'),
    ]
    assert tools.calls == [("save", {"path": "hello.py"}), ("save", {"path": "world.py"})]


async def test_ollama_calls_without_any_index_stay_apart() -> None:
    _events, done, _model, tools = await run([*wire("ollama_tool_calls_without_index"), "ok"])
    assert calls_of(done.messages[1]) == [
        ("call_0fq1x7lb", "get_weather", '{"city":"Oslo"}'),
        ("call_u2m8c4ve", "get_weather", '{"city":"Rome"}'),
    ]
    assert sorted(c[1]["city"] for c in tools.calls) == ["Oslo", "Rome"]


async def test_litellm_object_arguments_become_json_strings_and_finish_stop_still_runs() -> None:
    _events, done, model, tools = await run([*wire("litellm_ollama_chat_object_arguments"), "ok"])
    assert done.reason == "stop"
    assert calls_of(done.messages[1]) == [
        ("f3b9a2c1-7d", "get_weather", '{"city": "Kyiv"}'),
        ("0c5e71d4-2a", "save", '{"path": "kyiv.txt"}'),
    ]
    assert tools.calls == [("get_weather", {"city": "Kyiv"}), ("save", {"path": "kyiv.txt"})]
    assert all(isinstance(c[2], str) for c in calls_of(sent_assistant(model, 1)))


async def test_litellm_id_on_every_fragment_is_one_call() -> None:
    _events, done, _model, tools = await run([*wire("litellm_id_on_every_fragment"), "ok"])
    assert calls_of(done.messages[1]) == [("call_abc", "get_weather", '{"city": "Quito"}')]
    assert tools.calls == [("get_weather", {"city": "Quito"})]


async def test_lmstudio_arguments_in_one_fragment() -> None:
    _events, done, _model, tools = await run([*wire("lmstudio_arguments_in_one_chunk"), "ok"])
    assert calls_of(done.messages[1]) == [("265806134", "get_weather", '{"city":"Porto"}')]
    assert tools.calls == [("get_weather", {"city": "Porto"})]


async def test_mistral_ids_are_kept_and_ids_sagents_invents_are_nine_alphanumerics() -> None:
    _events, done, model, _tools = await run([wire("mistral_whole_call_nine_char_id")[0], "ok"])
    assert calls_of(done.messages[1]) == [("D681PevKs", "get_weather", '{"city": "Berlin"}')]
    assert calls_of(sent_assistant(model, 1))[0][0] == "D681PevKs"
    # a server that sends calls without ids: the ids the loop gives them pass Mistral's rule
    no_ids = WireReply.from_json(
        {
            "body": [
                _chunk({"tool_calls": [{"index": 0, "function": {"name": "get_weather"}}]}),
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"A"}'}}]}),
                _chunk({"tool_calls": [{"index": 1, "function": {"name": "get_weather"}}]}),
                _chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"city":"B"}'}}]}),
                _chunk({}, "tool_calls"),
            ],
            "done": True,
        }
    )
    _events, done, model, _tools = await run([no_ids, "ok"])
    ids = [c[0] for c in calls_of(sent_assistant(model, 1))]
    assert len(ids) == len(set(ids)) == 2
    assert all(NINE_ALNUM.fullmatch(i) for i in ids), ids
    assert [m["tool_call_id"] for m in tool_messages(done.messages)] == ids


async def test_cumulative_arguments_and_an_id_that_changes_make_one_call() -> None:
    body = [
        _chunk({"tool_calls": [{"index": 0, "id": "a1", "function": {"name": "get_weather"}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "a2", "function": {"arguments": '{"city"'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Oslo"}'}}]}),
        _chunk({}, "tool_calls"),
    ]
    stream = WireReply.from_json({"body": body, "done": True})
    _events, done, _model, tools = await run([stream, "ok"])
    assert calls_of(done.messages[1]) == [("a1", "get_weather", '{"city": "Oslo"}')]
    assert tools.calls == [("get_weather", {"city": "Oslo"})]


async def test_empty_arguments_are_sent_back_as_an_empty_object() -> None:
    call = ScriptedToolCall(name="get_weather", arguments="", id="call_empty01")
    _events, done, model, _tools = await run([ScriptedReply(tool_calls=(call,)), "ok"])
    assert calls_of(sent_assistant(model, 1)) == [("call_empty01", "get_weather", "{}")]
    assert "city" in tool_messages(done.messages)[0]["content"]  # the tool says what is missing


# -- reasoning ----------------------------------------------------------------------------------


async def test_deepseek_reasoning_is_streamed_kept_and_sent_back_on_the_tool_call_turn() -> None:
    events, done, model, tools = await run(wire("deepseek_reasoning_tool_call"))
    assert done.reason == "stop"
    reasoning = "".join(e.delta for e in events if isinstance(e, ReasoningDeltaEvent))
    assert reasoning == "The user wants the weather; call get_weather.Sunny, say so."
    text = "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent))
    assert text == "Sunny in Hangzhou."
    assert tools.calls == [("get_weather", {"city": "Hangzhou"})]
    sent = sent_assistant(model, 1)
    assert sent["reasoning_content"] == "The user wants the weather; call get_weather."
    assert done.messages[-1]["content"] == "Sunny in Hangzhou."
    assert done.messages[-1]["reasoning_content"] == "Sunny, say so."


async def test_usage_carries_cached_and_reasoning_tokens_when_reported() -> None:
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920},
        "completion_tokens_details": {"reasoning_tokens": 64},
    }
    body = [
        _chunk({"role": "assistant", "content": "hi"}),
        _chunk({}, "stop"),
        {**_chunk({}), "choices": [], "usage": usage},
    ]
    events, done, _model, _tools = await run([WireReply.from_json({"body": body, "done": True})])
    assert done.reason == "stop"
    (event,) = [e for e in events if isinstance(e, UsageEvent)]
    assert (event.prompt_tokens, event.completion_tokens) == (2006, 300)
    assert (event.cached_tokens, event.reasoning_tokens) == (1920, 64)


# -- cut, stalled and truncated answers ---------------------------------------------------------


async def test_finish_length_inside_a_tool_call_runs_nothing_and_tells_the_model() -> None:
    _events, done, model, tools = await run([*wire("openai_length_inside_tool_call"), "ok"])
    assert done.reason == "stop"
    assert not tools.calls
    (result,) = tool_messages(done.messages)
    assert result["tool_call_id"] == "call_Wr1teLong"
    assert "output_truncated" in result["content"]
    assert "output token limit" in result["content"]
    assert "invalid" not in result["content"].lower()
    assert model.requests[1]["messages"][-1] == result


async def test_a_stream_cut_mid_text_is_never_taken_as_the_answer() -> None:
    events, done, _model, _tools = await run(wire("cut_mid_text"))
    assert "".join(e.delta for e in events if isinstance(e, MessageDeltaEvent)) == (
        "The answer is definitely"
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert "without a finish reason" in done.error["message"]
    assert list(done.messages) == USER


async def test_a_stream_cut_between_two_parallel_calls_runs_neither() -> None:
    _events, done, _model, tools = await run(
        wire("cut_between_parallel_calls") * 2, model_options={"max_retries": 1}
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_stream_broken"
    assert not tools.calls
    assert list(done.messages) == USER


async def test_a_stream_cut_before_anything_was_passed_on_is_retried() -> None:
    cut = WireReply.from_json({"body": [_chunk({"role": "assistant", "content": ""})]})
    _events, done, model, _tools = await run([cut, "whole answer"])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "whole answer"
    assert len(model.requests) == 2


async def test_keepalive_comments_do_not_reset_the_idle_timeout() -> None:
    events, done, _model, _tools = await run(
        wire("openrouter_keepalive_comments"), model_options={"timeout": 1.0}
    )
    assert [e.delta for e in events if isinstance(e, MessageDeltaEvent)] == ["Let me"]
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_timeout"
    assert done.error["details"]["limit"] == "timeout"
    assert "keep-alive comments do not count" in done.error["message"]
    assert list(done.messages) == USER


async def test_the_deadline_ends_a_call_whatever_the_idle_timeout() -> None:
    _events, done, _model, _tools = await run(
        wire("openrouter_keepalive_comments"), model_options={"timeout": 60.0, "deadline": 1.0}
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_timeout"
    assert done.error["details"]["limit"] == "deadline"


# -- error answers ------------------------------------------------------------------------------


async def test_429_insufficient_quota_is_one_clear_error_not_retried() -> None:
    _events, done, model, _tools = await run(
        wire("openai_429_insufficient_quota") * 3, model_options={"max_retries": 2}
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_quota_exhausted"
    assert "billing" in (done.error.get("hint") or "")
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "abc"},
        {"Retry-After": "nan"},
        {"Retry-After": "-5"},
        {"Retry-After": "inf"},
        {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},  # in the past: at once
        {"retry-after-ms": "20"},
        {"retry-after-ms": "soon", "Retry-After": "0"},
    ],
    ids=["garbage", "nan", "negative", "inf", "past-date", "ms", "bad-ms-good-seconds"],
)
async def test_any_retry_after_is_handled_and_the_retry_succeeds(headers: dict[str, str]) -> None:
    busy = ScriptedReply(status=503, error_message="busy", headers=headers)
    _events, done, model, _tools = await run([busy, "finally"])
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "finally"
    assert len(model.requests) == 2


async def test_a_retry_after_longer_than_the_maximum_ends_the_run_clearly() -> None:
    _events, done, model, _tools = await run(
        [http_error(429, "slow down", retry_after=120), "never"],
        model_options={"max_retry_wait": 5.0},
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "model_unavailable"
    assert "asks to wait 120 s" in done.error["message"]
    assert "max_retry_wait" in (done.error.get("hint") or "")
    assert len(model.requests) == 1


# -- context length -----------------------------------------------------------------------------

LONG_HISTORY = [
    {"role": "user", "content": "the task: summarise the logs"},
    {"role": "assistant", "content": "Reading them. " * 40},
    {"role": "user", "content": "also count the errors"},
    {"role": "assistant", "content": "Counted. " * 40},
    {"role": "user", "content": "now write it up"},
]


async def test_context_length_with_compression_on_compresses_and_retries_once(
    tmp_path: Path,
) -> None:
    events, done, model, _tools = await run(
        [*wire("llama_cpp_python_context_length"), "SUMMARY", "the write-up"],
        messages=LONG_HISTORY,
        max_history_tokens=100_000,  # automatic compression on; the budget is not what fails
        compression=CompressionSettings(keep_recent_tokens=5, records_dir=tmp_path),
    )
    assert done.reason == "stop"
    assert done.messages[-1]["content"] == "the write-up"
    assert [e.reason for e in events if isinstance(e, HistoryCompressEvent)] == ["context_length"]
    assert len(model.requests) == 3
    retried = model.requests[2]["messages"]
    # the user's own messages survive verbatim; the assistant's turns became the summary
    users = [m["content"] for m in retried if m["role"] == "user"]
    assert users[:2] == ["the task: summarise the logs", "also count the errors"]
    assert users[-1] == "now write it up"
    assert any("SUMMARY" in u for u in users)
    assert not any(m["role"] == "assistant" and "Reading" in m["content"] for m in retried)


async def test_context_length_after_compressing_once_is_a_clear_error(tmp_path: Path) -> None:
    refused = wire("llama_cpp_python_context_length")
    _events, done, model, _tools = await run(
        [*refused, "SUMMARY", *refused, "never"],
        messages=LONG_HISTORY,
        max_history_tokens=100_000,
        compression=CompressionSettings(keep_recent_tokens=5, records_dir=tmp_path),
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "context_length_exceeded"
    assert len(model.requests) == 3


async def test_context_length_without_automatic_compression_is_not_retried() -> None:
    _events, done, model, _tools = await run(
        [*wire("llama_cpp_python_context_length"), "never"], messages=LONG_HISTORY
    )
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "context_length_exceeded"
    assert len(model.requests) == 1


# -- many calls in one answer -------------------------------------------------------------------


async def test_calls_past_max_tool_calls_per_answer_are_settled_unrun() -> None:
    calls = tuple(
        ScriptedToolCall(name="get_weather", arguments={"city": f"c{n}"}, id=f"call{n:05d}")
        for n in range(10)
    )
    _events, done, _model, tools = await run(
        [ScriptedReply(tool_calls=calls), "ok"], max_tool_calls_per_answer=3
    )
    assert done.reason == "stop"
    assert [c[1]["city"] for c in tools.calls] == ["c0", "c1", "c2"]
    results = tool_messages(done.messages)
    assert len(results) == 10
    assert all("too_many_tool_calls" in r["content"] for r in results[3:])
    assert "at most 3" in results[3]["content"]


async def test_an_answer_with_hundreds_of_write_calls_asks_at_most_the_default_cap() -> None:
    calls = tuple(
        ScriptedToolCall(name="save", arguments={"path": f"f{n}"}, id=f"call{n:05d}")
        for n in range(300)
    )
    tools = Tools()
    async with ScriptedModel([ScriptedReply(tool_calls=calls), "ok"]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        events = await collect(
            agent,
            USER,
            tool_manager=tools.manager(),
            session_context=SessionContext(permission_mode="ask"),
            approver=AllowAllApprover(),
        )
    done = done_of(events)
    assert_settled_once(done.messages)
    assert sum(isinstance(e, ApprovalRequestEvent) for e in events) == 128
    assert len(tools.calls) == 128
    assert sum("too_many_tool_calls" in m["content"] for m in tool_messages(done.messages)) == 172


# -- a broken adapter ---------------------------------------------------------------------------


class BrokenModel:
    """A model adapter with a bug: it raises something no one expects."""

    model = "broken"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        raise KeyError("a bug in an adapter")
        yield  # an async generator

    async def aclose(self) -> None:
        pass


async def test_a_bug_below_the_loop_ends_the_run_with_done_error_never_a_raise() -> None:
    agent = SAgent(model=BrokenModel(), run_script=False)
    done = done_of(await collect(agent, USER, tool_manager=ToolManager()))
    assert done.reason == "error"
    assert done.error is not None
    assert done.error["code"] == "internal_error"
    assert "a bug in an adapter" in done.error["message"]
    assert list(done.messages) == USER


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-inline",
        "object": "chat.completion.chunk",
        "created": 1733000000,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_every_fixture_names_its_server_and_sources_and_loads() -> None:
    for path in sorted(WIRE.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["server"], path.name
        assert data["behaviour"], path.name
        assert data["sources"], path.name
        assert all(s.startswith("https://") for s in data["sources"])
        assert load_wire(path), path.name


@pytest.mark.parametrize(
    "form",
    [{"body": [3]}, {"end": "explode"}, {"headers": ["x"]}],
    ids=["piece", "end", "headers"],
)
def test_a_malformed_wire_reply_is_a_clear_error(form: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"piece|end|headers"):
        WireReply.from_json(form)


async def test_a_tool_call_id_a_server_refuses_by_its_form_goes_in_mistral_s_rule() -> None:
    # Azure OpenAI: at most 40 characters; a gateway's ids for Vertex's id-less calls are 44
    refusal = wire("tool_call_id_form_refused")[0]
    long_id = "portkey-6aa6db90-1b84-4155-9f32-f658c97d6b1b"
    function = {"name": "get_weather", "arguments": '{"city": "Lima"}'}
    call = {"id": long_id, "type": "function", "function": function}
    history: list[dict[str, Any]] = [
        *USER,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": long_id, "content": "sunny in Lima"},
        {"role": "user", "content": "and tomorrow?"},
    ]

    def azure(body: dict[str, Any]) -> ScriptedReply | WireReply:
        ids = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
        return refusal if any(len(i) > 40 for i in ids) else ScriptedReply(content="Rain.")

    _events, done, model, _tools = await run(azure, messages=history)
    assert done.reason == "stop", done.error
    assert len(model.requests) == 2
    (sent,) = [c["id"] for m in model.requests[1]["messages"] for c in m.get("tool_calls") or []]
    assert NINE_ALNUM.fullmatch(sent)
    assert model.requests[1]["messages"][2]["tool_call_id"] == sent
    assert done.messages[1]["tool_calls"][0]["id"] == long_id


async def test_a_server_refusing_its_own_call_ids_gets_them_in_the_rule_it_checks() -> None:
    # omlx serving Devstral gives its calls `call_<8 hex>` ids, which mistral_common refuses
    # when the turn comes back (HTTP 500): the first tool loop would end there
    refusal = wire("tool_call_id_form_refused")[1]
    own = ScriptedToolCall(name="get_weather", arguments='{"city": "Nice"}', id="call_49c89af0")
    answers: list[ScriptedReply | WireReply] = [
        ScriptedReply(tool_calls=(own,)),
        ScriptedReply(content="Sunny in Nice."),
    ]

    def omlx(body: dict[str, Any]) -> ScriptedReply | WireReply:
        ids = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
        return refusal if not all(NINE_ALNUM.fullmatch(i) for i in ids) else answers.pop(0)

    _events, done, model, tools = await run(omlx)
    assert done.reason == "stop", done.error
    assert tools.calls == [("get_weather", {"city": "Nice"})]
    assert len(model.requests) == 3  # refused once, not retried as a transient 500
    assert done.messages[1]["tool_calls"][0]["id"] == "call_49c89af0"  # the model's own id
