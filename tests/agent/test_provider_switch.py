"""A history made on one provider sent to another (docs/agent.md, "The model seam"): each
adapter sends reasoning back where its API wants it and never where its API refuses it. The
servers here enforce the rules each API documents, with the error bodies real servers send."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.agent import (
    Message,
    ReasoningPart,
    RunState,
    SAgent,
    TextPart,
    ToolCall,
    ToolResultPart,
)
from sagents.agent._state import message_from_json, message_to_json
from sagents.testing import ScriptedModel, ScriptedReply, WireReply, load_wire, reply
from sagents.tool import SessionContext, ToolManager, tool
from tests.agent.helpers import collect, done_of, json_answer

pytestmark = pytest.mark.anyio

THINKING = {"type": "enabled", "budget_tokens": 1024}
WIRE = Path(__file__).parent / "wire"
USER = [{"role": "user", "content": "weather?"}]


@tool(permission="read_only")
async def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def anthropic_refusal(message: str) -> WireReply:
    return json_answer(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    )


def anthropic_thinking_rules(body: dict[str, Any]) -> WireReply | None:
    """Anthropic's refusals of a request's thinking blocks ("Extended thinking"; the bodies of
    https://github.com/n8n-io/n8n/issues/22550 and
    https://github.com/tailcallhq/forgecode/issues/2107), None for a request it takes."""
    messages: Sequence[dict[str, Any]] = body["messages"]
    for number, message in enumerate(messages):
        blocks = message["content"]
        if message["role"] == "assistant" and blocks and blocks[-1]["type"] == "thinking":
            return anthropic_refusal(
                f"messages.{number}: The final block in an assistant message cannot be `thinking`."
            )
    last = messages[-1]
    in_tool_loop = last["role"] == "user" and any(
        b["type"] == "tool_result" for b in last["content"]
    )
    if "thinking" in body and in_tool_loop:
        number = len(messages) - 2
        first = messages[number]["content"][0]["type"]
        if first not in ("thinking", "redacted_thinking"):
            return anthropic_refusal(
                f"messages.{number}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{first}`. When `thinking` is enabled, a final `assistant` message "
                "must start with a thinking block (preceeding the lastmost set of `tool_use` "
                "and `tool_result` blocks). We recommend you include thinking blocks from "
                "previous turns. To avoid this requirement, disable `thinking`."
            )
    return None


def tool_turn(reasoning: ReasoningPart, call_id: str) -> list[Message]:
    """A history in the middle of a tool loop: the task, a turn with ``reasoning`` that called
    a tool, and its result."""
    return [
        Message(role="user", parts=(TextPart(text="weather?"),)),
        Message(
            role="assistant",
            parts=(
                reasoning,
                ToolCall(id=call_id, name="get_weather", arguments='{"city": "Paris"}'),
            ),
        ),
        Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, content="sunny"),)),
    ]


def anthropic_server(answer: str) -> Any:
    def answering(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return anthropic_thinking_rules(body) or reply(answer)

    return answering


async def test_a_tool_turn_made_elsewhere_goes_to_anthropic_with_thinking_on() -> None:
    # a chat model called the tool (its reasoning has no Anthropic signature); the run goes on
    # on Anthropic with thinking on: the API wants that turn to start with a thinking block
    history = tool_turn(ReasoningPart(text="I should look it up."), "call_1")
    async with ScriptedModel(anthropic_server("Sunny."), api="anthropic") as server:
        agent = SAgent(model=server.chat_model(thinking=THINKING), run_script=False)
        done = done_of(await collect(agent, history))
    assert done.reason == "stop", done.error
    assert done.messages[-1]["content"] == "Sunny."
    assert "thinking" not in server.requests[0]  # this request only: the turn has no thinking


async def test_anthropic_keeps_thinking_on_where_the_turn_has_its_thinking_block() -> None:
    history = tool_turn(
        ReasoningPart(text="Look it up.", signature="sig-1", provider="anthropic"), "toolu_1"
    )
    async with ScriptedModel(anthropic_server("Sunny."), api="anthropic") as server:
        agent = SAgent(model=server.chat_model(thinking=THINKING), run_script=False)
        done = done_of(await collect(agent, history))
    assert done.reason == "stop", done.error
    assert server.requests[0]["thinking"] == THINKING
    assert server.requests[0]["messages"][1]["content"][0]["signature"] == "sig-1"


async def test_an_anthropic_answer_of_thinking_alone_is_not_sent_back_as_such() -> None:
    # an answer cut by max_tokens inside its thinking: no text, no call, only the block
    history = [
        Message(role="user", parts=(TextPart(text="think hard"),)),
        Message(
            role="assistant",
            parts=(ReasoningPart(text="Hmm...", signature="sig-2", provider="anthropic"),),
        ),
        Message(role="user", parts=(TextPart(text="go on"),)),
    ]
    async with ScriptedModel(anthropic_server("Done."), api="anthropic") as server:
        agent = SAgent(model=server.chat_model(thinking=THINKING), run_script=False)
        done = done_of(await collect(agent, history))
    assert done.reason == "stop", done.error
    assert [m["role"] for m in server.requests[0]["messages"]] == ["user"]
    texts = [b["text"] for b in server.requests[0]["messages"][0]["content"]]
    assert texts == ["think hard", "go on"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_reasoning_goes_back_in_the_field_the_server_sent_it_in(stream: bool) -> None:
    streamed, whole, refusal = load_wire(WIRE / "cerebras_reasoning_field.json")
    answers: list[ScriptedReply | WireReply] = [
        streamed if stream else whole,
        reply("Sunny in Paris."),
    ]

    def cerebras(body: dict[str, Any]) -> ScriptedReply | WireReply:
        if any("reasoning_content" in m for m in body["messages"]):
            return refusal
        return answers.pop(0)

    manager = ToolManager()
    manager.register_tool(get_weather)
    async with ScriptedModel(cerebras) as server:
        agent = SAgent(model=server.chat_model(stream=stream), run_script=False)
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=manager,
                session_context=SessionContext(permission_mode="auto"),
            )
        )
    assert done.reason == "stop", done.error
    sent = server.requests[1]["messages"][1]
    assert sent["reasoning"] == "The user wants the weather. Call the tool."
    assert "reasoning_content" not in sent
    assert done.history[1].reasoning == "The user wants the weather. Call the tool."


def responses_pairing_rule(body: dict[str, Any]) -> WireReply | None:
    """The Responses API's refusal of a reasoning item sent without the item after it (by
    id), or of that item (``fc_...``) without its reasoning item (docs/agent.md,
    "OpenAIResponsesModel"), None for an input it takes."""
    items = [i for i in body["input"] if isinstance(i, dict)]
    for index, item in enumerate(items):
        following = items[index + 1] if index + 1 < len(items) else {}
        if item.get("type") == "reasoning" and not following.get("id"):
            message = (
                f"Item '{item['id']}' of type 'reasoning' was provided without its required "
                "following item."
            )
            return json_answer(
                400, {"error": {"message": message, "type": "invalid_request_error"}}
            )
        previous = items[index - 1] if index else {}
        if str(item.get("id", "")).startswith("fc_") and previous.get("type") != "reasoning":
            message = (
                f"Item '{item['id']}' of type 'function_call' was provided without its required "
                "'reasoning' item"
            )
            return json_answer(
                400, {"error": {"message": message, "type": "invalid_request_error"}}
            )
    return None


async def test_a_responses_reasoning_turn_survives_the_run_state_as_a_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGENTS_STATE_KEY", "k" * 40)
    (called,) = load_wire(WIRE / "responses_reasoning_tool_call.json")[:1]
    answers: list[ScriptedReply | WireReply] = [called, reply("Sunny in Paris.")]

    def openai(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return responses_pairing_rule(body) or answers.pop(0)

    @tool(permission="write")
    async def get_weather(city: str) -> str:
        """The weather of a city (asked about first)."""
        return f"sunny in {city}"

    manager = ToolManager()
    manager.register_tool(get_weather)
    context = SessionContext(session_id="s1", permission_mode="ask")
    async with ScriptedModel(openai, api="responses") as server:
        paused = await SAgent(model=server.chat_model(), run_script=False).run(
            USER, tool_manager=manager, session_context=context, approvals="defer"
        )
        assert paused.state is not None
        state = RunState.from_json(paused.state.to_json())
        state.approve(paused.interruptions[0].id)
        done = await SAgent(model=server.chat_model(), run_script=False).run(
            state=state, tool_manager=manager, session_context=context
        )
    assert done.reason == "stop", done.error
    assert done.history[1] == paused.history[1]  # every part, ids and signatures included
    sent = [i.get("type") for i in server.requests[1]["input"] if isinstance(i, dict)]
    assert sent[1:3] == ["reasoning", "function_call"]


_TEXTS = st.text(max_size=12)
_IDS = st.none() | st.text(min_size=1, max_size=8)
_PARTS = st.one_of(
    st.builds(TextPart, text=_TEXTS, item_id=_IDS),
    st.builds(ReasoningPart, text=_TEXTS, signature=_IDS, id=_IDS, provider=_IDS),
    st.builds(ToolCall, id=_TEXTS, name=_TEXTS, arguments=_TEXTS, item_id=_IDS),
    st.builds(ToolResultPart, tool_call_id=_TEXTS, content=_TEXTS),
)


@given(
    st.builds(
        Message,
        role=st.sampled_from(["system", "user", "assistant", "tool"]),
        parts=st.lists(_PARTS, max_size=5).map(tuple),
    )
)
def test_a_message_survives_its_json_form_with_every_field(message: Message) -> None:
    # the form of RunState and of the stored sessions (docs/agent.md, "Pausing and resuming")
    assert message_from_json(json.loads(json.dumps(message_to_json(message)))) == message


ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def anthropic_id_rule(body: dict[str, Any]) -> WireReply | None:
    """Anthropic's refusal of a tool_use id outside ``^[a-zA-Z0-9_-]+$`` (the body of
    https://github.com/maximhq/bifrost/issues/5097), None for a request it takes."""
    for number, message in enumerate(body["messages"]):
        for index, block in enumerate(message["content"]):
            key = {"tool_use": "id", "tool_result": "tool_use_id"}.get(block["type"])
            if key is not None and not ANTHROPIC_ID.match(block[key]):
                return anthropic_refusal(
                    f"messages.{number}.content.{index}.{block['type']}.{key}: String should "
                    "match pattern '^[a-zA-Z0-9_-]+$'"
                )
    return None


async def test_tool_call_ids_of_another_server_go_to_anthropic_in_its_pattern() -> None:
    # Kimi (Moonshot) names its calls "functions.<name>:<n>"; the run goes on on Anthropic
    history = [
        *tool_turn(ReasoningPart(text="Look it up."), "functions.get_weather:0")[:2],
        Message(
            role="tool",
            parts=(ToolResultPart(tool_call_id="functions.get_weather:0", content="sunny"),),
        ),
        Message(role="user", parts=(TextPart(text="and tomorrow?"),)),
    ]

    def anthropic(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return anthropic_id_rule(body) or reply("Sunny too.")

    async with ScriptedModel(anthropic, api="anthropic") as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, history))
    assert done.reason == "stop", done.error
    sent = server.requests[0]["messages"]
    call_id = sent[1]["content"][0]["id"]
    assert sent[2]["content"][0]["tool_use_id"] == call_id
    assert ANTHROPIC_ID.match(call_id)
    assert done.history[1].tool_calls[0].id == "functions.get_weather:0"  # the history's own
