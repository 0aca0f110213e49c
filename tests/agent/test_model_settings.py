"""``SAgent(model_settings=...)`` on the wire, where a real server refuses what the settings
first became, and the usage a real server reports in its own fields (docs/agent.md, "The model
seam")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from sagents.agent import ModelSettings, SAgent, UsageEvent
from sagents.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
    load_wire,
    reply,
)
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import collect, json_answer

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "go"}]


@tool(permission="read_only")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


# OpenAI's Chat Completions for its reasoning models (o-series, GPT-5.x): max_tokens is refused
# (https://github.com/griptape-ai/ComfyUI-Griptape/issues/312,
# https://github.com/microsoft/vscode-copilot-release/issues/8065)
MAX_TOKENS_REFUSED = json_answer(
    400,
    {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    },
)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_model_refusing_max_tokens_gets_max_completion_tokens(stream: bool) -> None:
    def gpt_5(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return MAX_TOKENS_REFUSED if "max_tokens" in body else reply("Hello.")

    async with ScriptedModel(gpt_5) as server:
        agent = SAgent(
            model=server.chat_model(stream=stream),
            run_script=False,
            model_settings=ModelSettings(max_tokens=50),
        )
        first = await agent.run(USER)
        second = await agent.run(USER)
    assert first.reason == "stop", first.error
    assert second.reason == "stop", second.error
    assert first.output == second.output == "Hello."
    # refused once, then the same request with max_completion_tokens; the adapter keeps it
    assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in server.requests] == [
        (True, None),
        (False, 50),
        (False, 50),
    ]


async def test_a_server_taking_max_tokens_gets_max_tokens() -> None:
    async with ScriptedModel([reply("Hello.")]) as server:
        agent = SAgent(
            model=server.chat_model(), run_script=False, model_settings=ModelSettings(max_tokens=7)
        )
        result = await agent.run(USER)
    assert result.reason == "stop"
    assert server.requests[0]["max_tokens"] == 7
    assert "max_completion_tokens" not in server.requests[0]


async def test_deepseek_reports_its_cache_hits_as_cached_tokens() -> None:
    streamed, whole = load_wire(Path(__file__).parent / "wire" / "deepseek_usage_cache_hit.json")
    usage = []
    for stream, answer in ((True, streamed), (False, whole)):
        async with ScriptedModel([answer]) as server:
            agent = SAgent(model=server.chat_model(stream=stream), run_script=False)
            events = await collect(agent, USER)
        usage += [
            (e.prompt_tokens, e.completion_tokens, e.cached_tokens, e.reasoning_tokens)
            for e in events
            if isinstance(e, UsageEvent)
        ]
    assert usage == [(1200, 40, 1024, 30)] * 2


async def test_model_settings_as_a_mapping_are_the_same_settings() -> None:
    # pydantic-ai's ModelSettings is a TypedDict: a dict is what its users write
    async with ScriptedModel([reply("Hello.")]) as server:
        agent = SAgent(
            model=server.chat_model(),
            run_script=False,
            model_settings={"temperature": 0.2, "max_tokens": 9},
        )
        result = await agent.run(USER)
    assert result.reason == "stop", result.error
    assert agent.model_settings == ModelSettings(temperature=0.2, max_tokens=9)
    assert (server.requests[0]["temperature"], server.requests[0]["max_tokens"]) == (0.2, 9)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"temprature": 0.2}, "unknown model_settings key 'temprature'"),
        ({"temperature": -1}, "temperature is a number of 0 or more"),
        ("0.2", "model_settings is a ModelSettings or a mapping of its fields"),
    ],
    ids=["misspelt-key", "bad-value", "string"],
)
def test_bad_model_settings_are_refused_when_the_agent_is_built(settings: Any, said: str) -> None:
    with pytest.raises((TypeError, ValueError), match=re.escape(said)):
        SAgent(model=_model(), model_settings=settings)


def _model() -> Any:
    from sagents.agent import OpenAIChatModel

    return OpenAIChatModel(model="m", base_url="http://127.0.0.1:9/v1", api_key="k")


@pytest.mark.parametrize(
    ("index", "api"),
    [(0, "gemini"), (1, "gemini"), (2, "chat")],
    ids=["gemini-blocked-prompt", "gemini-safety", "azure-content-filter"],
)
async def test_an_answer_the_content_filter_withheld_is_an_error_not_an_empty_answer(
    index: int, api: str
) -> None:
    withheld = load_wire(Path(__file__).parent / "wire" / "content_filter_empty_answers.json")
    async with ScriptedModel([withheld[index]], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(stream=False), run_script=False)
        result = await agent.run(USER)
    assert result.reason == "error"
    assert result.error is not None
    assert result.error["code"] == "model_error"
    assert "content filter" in result.error["message"]
    assert list(result.messages) == USER  # no empty answer in the history
    assert len(server.requests) == 1  # the same request would be withheld again


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic", "gemini"])
async def test_a_mapping_forcing_a_tool_with_output_type_calls_once_then_answers_the_type(
    api: str,
) -> None:
    settings = {"temperature": 0.2, "max_tokens": 64, "tool_choice": "required"}
    script = [
        ScriptedReply(tool_calls=(ScriptedToolCall(name="lookup", arguments={"key": "a"}),)),
        reply('{"x": 1, "y": 2}'),
    ]
    manager = ToolManager()
    manager.register_tool(lookup)
    async with ScriptedModel(script, api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(), run_script=False, model_settings=settings, output_type=Point
        )
        result = await agent.run(
            USER, tool_manager=manager, session_context=SessionContext(permission_mode="auto")
        )
        first, second = server.requests
    assert result.reason == "stop", result.error
    assert result.output == Point(x=1, y=2)
    assert "0.2" in json.dumps(first)
    forced = {"chat": "tool_choice", "responses": "tool_choice", "anthropic": "tool_choice"}
    if api in forced:  # the forced choice was spent by the call: the model may answer
        assert forced[api] in first
        assert forced[api] not in second
    else:
        assert first["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"
        assert "toolConfig" not in second or (
            second["toolConfig"]["functionCallingConfig"]["mode"] != "ANY"
        )


def _sent_settings(api: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """The temperature and the output limit a request carries, in its API's own fields."""
    if api == "gemini":
        config = body.get("generationConfig", {})
        return config.get("temperature"), config.get("maxOutputTokens")
    limit = {"chat": "max_tokens", "responses": "max_output_tokens", "anthropic": "max_tokens"}
    return body.get("temperature"), body.get(limit[api])


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic", "gemini"])
async def test_a_run_s_model_settings_replace_the_agent_s_for_that_run_only(api: str) -> None:
    async with ScriptedModel([reply("one"), reply("two"), reply("three")], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(
            model=server.chat_model(stream=False),
            model_settings=ModelSettings(temperature=0.5, max_tokens=300),
            run_script=False,
        )
        first = await agent.run(USER, model_settings={"temperature": 0.0})
        second = await agent.run(USER, model_settings=ModelSettings(max_tokens=42))
        third = await agent.run(USER)
    assert (first.output, second.output, third.output) == ("one", "two", "three")
    sent = [_sent_settings(api, body) for body in server.requests]
    assert sent == [(0.0, 300), (0.5, 42), (0.5, 300)]


@pytest.mark.parametrize(
    ("settings", "error", "said"),
    [
        ({"temprature": 0.1}, TypeError, "unknown model_settings key 'temprature'"),
        ({"max_tokens": 0}, ValueError, "max_tokens"),
        ("hot", TypeError, "model_settings is a ModelSettings or a mapping"),
    ],
)
async def test_bad_model_settings_of_a_run_are_refused_before_any_event(
    settings: Any, error: type[Exception], said: str
) -> None:
    async with ScriptedModel([reply("never")]) as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        with pytest.raises(error, match=said):
            await agent.run(USER, model_settings=settings)
    assert server.requests == []


@pytest.mark.parametrize(("index", "api"), [(0, "chat"), (1, "gemini")], ids=["azure", "gemini"])
async def test_an_answer_the_content_filter_cut_is_an_error_not_the_final_answer(
    index: int, api: str
) -> None:
    """https://learn.microsoft.com/en-us/azure/ai-foundry/openai/concepts/content-filter: the
    filter stops a streamed answer part way (``finish_reason: content_filter``; Gemini's
    ``RECITATION``): what came is not the whole answer, so it is not the run's final answer
    (it was, with ``stop``). The run ends with the same error as an answer withheld whole, the
    text that came in its details."""
    cut = load_wire(Path(__file__).parent / "wire" / "content_filter_cuts_an_answer.json")
    async with ScriptedModel([cut[index], "never"], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(), run_script=False)
        result = await agent.run(USER)
    assert result.reason == "error"
    assert result.error is not None
    assert result.error["code"] == "model_error"
    assert "content filter" in result.error["message"]
    assert result.error["details"]["answer"] in (
        "Step one: take the",
        "Here are the lyrics:\nIs this the real life",
    )
    assert list(result.messages) == USER
    assert len(server.requests) == 1
