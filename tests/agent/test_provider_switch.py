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
    DoneEvent,
    Finish,
    Message,
    ModelRequest,
    ReasoningPart,
    RunState,
    SAgent,
    TextPart,
    ToolCall,
    ToolResultPart,
)
from sagents.agent._call_ids import within_nine_char_rule
from sagents.agent._state import message_from_json, message_to_json
from sagents.testing import (
    ScriptedModel,
    ScriptedReply,
    ScriptedToolCall,
    WireReply,
    load_wire,
    reply,
)
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


# -- a history made elsewhere, sent to a Chat Completions server ------------------------------

ELSEWHERE = [
    pytest.param("anthropic_thinking_tool_use", "anthropic", id="anthropic"),
    pytest.param("gemini_thought_signature_parallel_calls", "gemini", id="gemini"),
    pytest.param("responses_reasoning_tool_call", "responses", id="responses"),
]
NEXT = {"role": "user", "content": "and tomorrow?"}


async def history_made_on(name: str, api: str) -> tuple[Message, ...]:
    """The history of a run on ``api`` whose model answered with the recorded tool-call answer
    of ``name`` (its reasoning, its call ids), through that API's SDK."""
    (called,) = load_wire(WIRE / f"{name}.json")[:1]
    async with ScriptedModel([called, "Sunny."], api=api) as server:  # type: ignore[arg-type]
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(
            await collect(
                agent,
                USER,
                tool_manager=weather_and_save(),
                session_context=SessionContext(permission_mode="auto"),
            )
        )
    assert done.reason == "stop", done.error
    assert any(m.reasoning or m.tool_calls for m in done.history)
    return done.history


def weather_and_save() -> ToolManager:
    @tool(permission="read_only")
    async def save(path: str, text: str = "") -> str:
        """Save a file."""
        return f"saved {path}"

    manager = ToolManager()
    manager.register_tool(get_weather)
    manager.register_tool(save)
    return manager


@pytest.mark.parametrize(("name", "api"), ELSEWHERE)
async def test_reasoning_made_elsewhere_is_not_sent_to_a_chat_server(name: str, api: str) -> None:
    # Cerebras refuses `reasoning_content` in a request; no Chat server made this reasoning, so
    # it goes in neither field (docs/agent.md, "OpenAIChatModel")
    history = await history_made_on(name, api)
    assert any(p.provider for m in history for p in m.parts if isinstance(p, ReasoningPart))
    refusal = load_wire(WIRE / "cerebras_reasoning_field.json")[2]

    def cerebras(body: dict[str, Any]) -> ScriptedReply | WireReply:
        if any("reasoning_content" in m for m in body["messages"]):
            return refusal
        return reply("Rain tomorrow.")

    async with ScriptedModel(cerebras) as server:
        agent = SAgent(model=server.chat_model(), run_script=False)
        done = done_of(await collect(agent, [*history, NEXT]))
    assert done.reason == "stop", done.error
    assert len(server.requests) == 1
    sent = [m for m in server.requests[0]["messages"] if m["role"] == "assistant"]
    assert sent
    assert not any("reasoning" in m or "reasoning_content" in m for m in sent)
    assert done.history[: len(history)] == history  # the history keeps every part


async def on_chat_server(
    refuses: Any, history: Sequence[Any], *answers: ScriptedReply | WireReply, **run: Any
) -> tuple[DoneEvent, list[dict[str, Any]]]:
    """The run of ``history`` on a Chat Completions server that answers ``refuses(body)``
    when that is not None (its refusal), else its next answer of ``answers`` (the last one
    repeated), and the requests the server got."""
    left = list(answers)

    def server(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return refuses(body) or (left.pop(0) if len(left) > 1 else left[0])

    async with ScriptedModel(server) as scripted:
        agent = SAgent(model=scripted.chat_model(), run_script=False)
        done = done_of(await collect(agent, list(history), **run))
    return done, scripted.requests


NINE_ALNUM = re.compile(r"[a-zA-Z0-9]{9}")


def mistral_id_rule(body: dict[str, Any]) -> WireReply | None:
    """Mistral's refusal of a request holding a call id that is not 9 characters
    ``[a-zA-Z0-9]`` (the recorded body), None for a request it takes. It also checks that
    each result answers a call of the assistant message before it."""
    refusal = load_wire(WIRE / "mistral_whole_call_nine_char_id.json")[1]
    called: set[str] = set()
    for message in body["messages"]:
        ids = [c["id"] for c in message.get("tool_calls") or []]
        if message["role"] == "assistant":
            called = set(ids)
        if message["role"] == "tool":
            ids = [message["tool_call_id"]]
            assert ids[0] in called, f"a result of no call: {ids[0]!r}"
        if not all(NINE_ALNUM.fullmatch(i) for i in ids):
            return refusal
    return None


def sent_ids(request: dict[str, Any]) -> list[str]:
    """Every call id of a Chat request, calls and results, in order."""
    ids: list[str] = []
    for message in request["messages"]:
        ids.extend(c["id"] for c in message.get("tool_calls") or [])
        if message["role"] == "tool":
            ids.append(message["tool_call_id"])
    return ids


@pytest.mark.parametrize(("name", "api"), ELSEWHERE)
async def test_call_ids_made_elsewhere_go_to_mistral_in_its_rule(name: str, api: str) -> None:
    history = await history_made_on(name, api)
    done, requests = await on_chat_server(
        mistral_id_rule,
        [*history, NEXT],
        load_wire(WIRE / "mistral_whole_call_nine_char_id.json")[0],
        reply("Rain tomorrow."),
        tool_manager=weather_and_save(),
        session_context=SessionContext(permission_mode="auto"),
    )
    assert done.reason == "stop", done.error
    assert done.history[: len(history)] == history  # the history's ids are its own
    assert done.history[len(history) + 1].tool_calls[0].id == "D681PevKs"
    taken = [r for r in requests if not mistral_id_rule(r)]
    assert len(taken) == 2  # the tool turn and the answer after it
    assert len(requests) <= 3  # refused once at most: then the adapter knows the rule
    for request in taken:
        assert all(NINE_ALNUM.fullmatch(i) for i in sent_ids(request))
    assert "D681PevKs" in sent_ids(taken[1])  # an id within the rule is sent as it is


def called(call_id: str, city: str) -> list[Message]:
    """An assistant turn calling ``get_weather`` with ``call_id``, and its result."""
    call = ToolCall(id=call_id, name="get_weather", arguments=json.dumps({"city": city}))
    result = ToolResultPart(tool_call_id=call_id, content=f"sunny in {city}")
    return [Message(role="assistant", parts=(call,)), Message(role="tool", parts=(result,))]


async def test_a_call_id_a_server_repeats_goes_to_mistral_as_one_id() -> None:
    # a server that numbers the calls of each answer from 0 repeats "call_0" in every turn
    history = [*tool_turn(ReasoningPart(text=""), "call_0")[:1], *called("call_0", "Oslo")]
    history += [*called("call_0", "Rome"), Message.from_openai(NEXT)]

    done, requests = await on_chat_server(mistral_id_rule, history, reply("Rain tomorrow."))
    assert done.reason == "stop", done.error
    first, first_result, second, second_result = sent_ids(requests[-1])
    assert first == first_result == second == second_result
    assert NINE_ALNUM.fullmatch(first)
    assert [c.id for m in done.history for c in m.tool_calls] == ["call_0", "call_0"]


async def test_an_empty_call_id_goes_to_mistral_as_one_id_for_the_call_and_its_result() -> None:
    # the loop gives a call without an id one of its own before any request (docs/agent.md,
    # "The model seam"); a history given to the adapter itself may still hold one
    messages = (
        Message(role="user", parts=(TextPart(text="weather?"),)),
        *called("", "Paris"),
        *called("call_1", "Oslo"),
    )

    def mistral(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return mistral_id_rule(body) or reply("Sunny.")

    async with ScriptedModel(mistral) as server:
        model = server.chat_model()
        events = [e async for e in model.stream(ModelRequest(messages=messages))]
        again = [e async for e in model.stream(ModelRequest(messages=messages))]
    assert isinstance(events[-1], Finish)
    assert isinstance(again[-1], Finish)
    assert events[-1].response.message.text == "Sunny."
    assert len(server.requests) == 3  # refused once; the adapter then sends the ids in the rule
    empty, empty_result, other, other_result = sent_ids(server.requests[-1])
    assert empty == empty_result != other == other_result
    assert NINE_ALNUM.fullmatch(empty)
    assert NINE_ALNUM.fullmatch(other)
    assert sent_ids(server.requests[1]) == sent_ids(server.requests[2])  # the same each time
    assert [c.id for m in messages for c in m.tool_calls] == ["", "call_1"]


async def test_an_id_mapped_for_mistral_never_takes_an_id_the_request_already_has() -> None:
    foreign = "toolu_01A09q90qw90lq917835lq9"
    (its_nine,) = within_nine_char_rule([{"role": "tool", "tool_call_id": foreign}])
    history = [
        Message(role="user", parts=(TextPart(text="weather?"),)),
        *tool_turn(ReasoningPart(text=""), foreign)[1:],
        *tool_turn(ReasoningPart(text=""), its_nine["tool_call_id"])[1:],
    ]

    done, requests = await on_chat_server(mistral_id_rule, history, reply("Sunny."))
    assert done.reason == "stop", done.error
    mapped, mapped_result, kept, kept_result = sent_ids(requests[-1])
    assert kept == kept_result == its_nine["tool_call_id"]  # within the rule: sent as it is
    assert mapped == mapped_result != kept
    assert NINE_ALNUM.fullmatch(mapped)


def deepseek_reasoning_rule(refusal: WireReply) -> Any:
    """DeepSeek's thinking mode: ``refusal`` for a request holding an assistant message with
    tool calls but no ``reasoning_content`` field; None for a request it takes."""

    def rule(body: dict[str, Any]) -> WireReply | None:
        for message in body["messages"]:
            if message.get("tool_calls") and not isinstance(message.get("reasoning_content"), str):
                return refusal
        return None

    return rule


@pytest.mark.parametrize("wording", [0, 1], ids=["deepseek-reasoner", "deepseek-v4"])
async def test_a_tool_turn_made_elsewhere_goes_to_deepseek_thinking_with_a_reasoning_field(
    wording: int,
) -> None:
    # a conversation started on Anthropic goes on on DeepSeek: the turn that called the tool
    # has no reasoning DeepSeek made (its thinking block is not sent to a Chat server), and
    # DeepSeek's thinking mode refuses a tool-call turn without the field
    history = await history_made_on("anthropic_thinking_tool_use", "anthropic")
    refuses = deepseek_reasoning_rule(
        load_wire(WIRE / "deepseek_missing_reasoning_content.json")[wording]
    )
    done, requests = await on_chat_server(
        refuses,
        [*history, NEXT],
        load_wire(WIRE / "deepseek_reasoning_tool_call.json")[0],
        reply("Rain tomorrow."),
        tool_manager=weather_and_save(),
        session_context=SessionContext(permission_mode="auto"),
    )
    assert done.reason == "stop", done.error
    taken = [r for r in requests if not refuses(r)]
    assert len(taken) == 2
    assert len(requests) == 3  # refused once: then the adapter sends the field
    made_elsewhere, its_own = [m for m in taken[1]["messages"] if m.get("tool_calls")]
    assert made_elsewhere["reasoning_content"] == ""  # not Anthropic's thinking
    assert its_own["reasoning_content"] == "The user wants the weather; call get_weather."


FIELD_REFUSED = [
    pytest.param(
        "deepseek_reasoning_tool_call",
        ("reasoning_field_extra_forbidden", 0),
        "reasoning_content",
        id="deepseek-to-mistral",
    ),
    pytest.param(
        "deepseek_reasoning_tool_call",
        ("cerebras_reasoning_field", 2),
        "reasoning_content",
        id="deepseek-to-cerebras",
    ),
    pytest.param(
        "cerebras_reasoning_field",
        ("reasoning_field_extra_forbidden", 1),
        "reasoning",
        id="cerebras-to-kimi",
    ),
]


@pytest.mark.parametrize(("made_on", "refusal", "field"), FIELD_REFUSED)
async def test_a_reasoning_field_a_chat_server_refuses_is_left_out_from_then_on(
    made_on: str, refusal: tuple[str, int], field: str
) -> None:
    # a history made on one Chat server goes on on another whose schema has no such field
    history = await history_made_on(made_on, "chat")
    refused = load_wire(WIRE / f"{refusal[0]}.json")[refusal[1]]

    def server(body: dict[str, Any]) -> ScriptedReply | WireReply:
        if any(field in m for m in body["messages"]):
            return refused
        return reply("Rain tomorrow.")

    async with ScriptedModel(server) as scripted:
        agent = SAgent(model=scripted.chat_model(), run_script=False)
        done = done_of(await collect(agent, [*history, NEXT]))
        later = [*done.history, Message(role="user", parts=(TextPart(text="and after?"),))]
        again = done_of(await collect(agent, later))
    assert done.reason == "stop", done.error
    assert again.reason == "stop", again.error
    assert len(scripted.requests) == 3  # refused once: the adapter then leaves the field out
    assert not any(field in m for m in scripted.requests[-1]["messages"])
    assert done.history[: len(history)] == history  # the history keeps the reasoning


async def test_results_of_calls_given_without_an_id_or_with_one_id_twice_are_kept() -> None:
    # a history given as dicts: a call without an id, and two calls of one answer sharing an
    # id (servers that repeat one). The loop gives such calls ids of their own before any
    # request; their results, which name them as the history did, stay theirs, in order
    def call(call_id: str, city: str) -> dict[str, Any]:
        arguments = json.dumps({"city": city})
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }

    def result(call_id: str, city: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": f"sunny in {city}"}

    history: list[dict[str, Any]] = [
        *USER,
        {"role": "assistant", "content": "", "tool_calls": [call("", "Paris")]},
        result("", "Paris"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("c1", "Oslo"), call("c1", "Rome")],
        },
        result("c1", "Oslo"),
        result("c1", "Rome"),
        NEXT,
    ]

    done, requests = await on_chat_server(mistral_id_rule, history, reply("Rain tomorrow."))
    assert done.reason == "stop", done.error
    sent = requests[-1]["messages"]
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    calls = [c for m in sent for c in m.get("tool_calls") or []]
    cities = [json.loads(c["function"]["arguments"])["city"] for c in calls]
    assert cities == ["Paris", "Oslo", "Rome"]
    assert [results[c["id"]] for c in calls] == ["sunny in Paris", "sunny in Oslo", "sunny in Rome"]
    assert len({c["id"] for c in calls}) == 3


def anthropic_unique_ids_rule(body: dict[str, Any]) -> WireReply | None:
    """Anthropic's refusal of a ``tool_use`` id used twice in one conversation (the body of
    https://github.com/trycua/cua/issues/524), None for a request it takes."""
    seen: set[str] = set()
    for number, message in enumerate(body["messages"]):
        for index, block in enumerate(message["content"]):
            if block["type"] == "tool_use":
                if block["id"] in seen:
                    return anthropic_refusal(
                        f"messages.{number}.content.{index}: `tool_use` ids must be unique"
                    )
                seen.add(block["id"])
    return None


def call_0(city: str) -> ScriptedReply:
    return ScriptedReply(
        tool_calls=(ScriptedToolCall(name="get_weather", arguments={"city": city}, id="call_0"),)
    )


async def test_a_call_id_a_server_reuses_across_turns_is_made_unique_for_anthropic() -> None:
    """https://github.com/NVIDIA-NeMo/Switchyard/issues/502: a Chat Completions backend (grok
    over OpenAI Chat) named every call ``call_0``, turn after turn; Anthropic refuses such a
    history ("`tool_use` ids must be unique"), so the conversation could not go on there. The
    history keeps the model's ids (docs/agent.md: the history keeps its ids); a call whose id
    an earlier call of the conversation has goes to Anthropic as an id of its own, its result
    with it."""
    manager = ToolManager()
    manager.register_tool(get_weather)
    auto = SessionContext(permission_mode="auto")
    async with ScriptedModel([call_0("Paris"), call_0("Oslo"), reply("Both sunny.")]) as chat:
        agent = SAgent(model=chat.chat_model(), run_script=False)
        first = done_of(await collect(agent, USER, tool_manager=manager, session_context=auto))
    assert first.reason == "stop", first.error
    ids = [call.id for message in first.history for call in message.tool_calls]
    assert ids == ["call_0", "call_0"]

    def anthropic(body: dict[str, Any]) -> ScriptedReply | WireReply:
        return anthropic_unique_ids_rule(body) or reply("Still sunny.")

    # the same history given as OpenAI dicts (as stored by an earlier version, or by another
    # client) goes to Anthropic with unique ids too, each result with its call
    as_dicts = [
        {"role": "user", "content": "weather?"},
        *[
            message
            for city in ("Paris", "Oslo")
            for message in (
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": json.dumps({"city": city}),
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_0", "content": f"sunny in {city}"},
            )
        ],
    ]
    for history in (
        [*first.history, Message(role="user", parts=(TextPart(text="and now?"),))],
        as_dicts,
    ):
        async with ScriptedModel(anthropic, api="anthropic") as server:
            agent = SAgent(model=server.chat_model(), run_script=False)
            done = done_of(
                await collect(agent, history, tool_manager=manager, session_context=auto)
            )
        assert done.reason == "stop", done.error
        sent = server.requests[0]["messages"]
        uses = [b["id"] for m in sent for b in m["content"] if b["type"] == "tool_use"]
        results = [
            b["tool_use_id"] for m in sent for b in m["content"] if b["type"] == "tool_result"
        ]
        assert len(set(uses)) == 2
        assert results == uses
        contents = [b["content"] for m in sent for b in m["content"] if b["type"] == "tool_result"]
        assert contents == ["sunny in Paris", "sunny in Oslo"]
