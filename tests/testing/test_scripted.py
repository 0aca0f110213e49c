"""ScriptedModel as a user sees it through the bare openai client: wire format and recording."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from sagents.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    http_error,
    reply,
    tool_call,
)

pytestmark = pytest.mark.anyio

MESSAGES: Any = [{"role": "user", "content": "hi"}]


async def test_a_whole_answer_carries_text_tool_calls_and_usage() -> None:
    calls = (
        ScriptedToolCall(name="a", arguments={"x": 1}, id="c1"),
        ScriptedToolCall(name="b", arguments="{not json", id="c2"),
    )
    async with ScriptedModel([ScriptedReply(content="thinking", tool_calls=calls)]) as model:
        client = AsyncOpenAI(base_url=model.base_url, api_key="k", max_retries=0)
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)
        await client.close()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "thinking"
    assert choice.message.tool_calls is not None
    got = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls]  # type: ignore[union-attr]
    assert got == [("c1", "a", '{"x": 1}'), ("c2", "b", "{not json")]
    assert completion.usage is not None
    assert completion.usage.total_tokens == 15


async def test_a_streamed_answer_rebuilds_to_the_same_text_and_arguments() -> None:
    async with ScriptedModel([tool_call("a", {"city": "Paris"}, id="c1", content="ok")]) as model:
        client = AsyncOpenAI(base_url=model.base_url, api_key="k", max_retries=0)
        stream = await client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        text, arguments, finish, usage = "", "", None, None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    arguments += (call.function.arguments or "") if call.function else ""
                finish = choice.finish_reason or finish
        await client.close()
    assert text == "ok"
    assert json.loads(arguments) == {"city": "Paris"}
    assert finish == "tool_calls"
    assert usage is not None


async def test_every_request_is_recorded_and_errors_carry_status_and_retry_after() -> None:
    async with ScriptedModel([http_error(429, "slow", retry_after=7), "plain"]) as model:
        client = AsyncOpenAI(base_url=model.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        assert caught.value.response.headers["retry-after"] == "7"
        second = await client.chat.completions.create(model="m", messages=MESSAGES, tools=[])
        with pytest.raises(openai.InternalServerError, match="exhausted"):
            await client.chat.completions.create(model="m", messages=MESSAGES)
        await client.close()
    assert second.choices[0].message.content == "plain"
    assert [r["messages"] for r in model.requests] == [MESSAGES] * 3
    assert model.remaining == 0


async def test_a_function_script_answers_from_the_request() -> None:
    def echo(body: dict[str, Any]) -> ScriptedReply:
        return reply(f"you said {body['messages'][-1]['content']}")

    async with ScriptedModel(echo) as model:
        client = AsyncOpenAI(base_url=model.base_url, api_key="k", max_retries=0)
        answer = await client.chat.completions.create(model="m", messages=MESSAGES)
        await client.close()
    assert answer.choices[0].message.content == "you said hi"


def test_no_lower_layer_imports_the_agent_loop() -> None:
    code = (
        "import sys\n"
        "import sagents.tool, sagents.skill, sagents.script, sagents.gateway, sagents.mcp\n"
        "print(sorted(m for m in sys.modules if m.startswith('sagents.agent')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
