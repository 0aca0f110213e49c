"""What a model adapter keeps between its calls (docs/agent.md, "The model seam"): one
``GeminiModel`` shared by several sessions at once keeps its tools' declarations, and each
request still carries its own session's contents and tools, never another's; the tool
exports every adapter keeps (``sagents/agent/_exported.py``) are not changed by sending them
(real SDK clients against ``ScriptedModel``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sagents.agent import GeminiModel, Message, ModelRequest, SAgent, TextPart
from sagents.agent._gemini import _declaration
from sagents.core._spec import ToolSpec
from sagents.testing import ScriptedModel, ScriptedReply, reply, tool_call
from sagents.tool import ToolManager, tool
from sagents.tool.export_anthropic import to_anthropic_tool
from sagents.tool.export_responses import to_responses_tool
from tests.agent.helpers import collect, done_of, model_events

pytestmark = pytest.mark.anyio

SESSIONS = ("alpha", "beta", "gamma")
TURNS = 3  # tool turns of each run before its answer
SEARCH = ToolSpec(
    name="search",
    description="Search.",
    input_schema={
        "type": "object",
        "title": "Search",
        "properties": {
            "filter": {"$ref": "#/$defs/Filter"},
            "kind": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "$defs": {"Filter": {"type": "object", "properties": {"q": {"type": "string"}}}},
    },
)


def manager_of(session: str) -> ToolManager:
    # one tool per session, under a name of its own
    async def probe(item: str) -> str:
        return f"{session} done"

    probe.__name__ = f"probe_{session}"
    probe.__doc__ = f"Probe {session}."
    manager = ToolManager()
    manager.register_tool(tool(permission="read_only")(probe))
    return manager


def texts(body: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for content in body.get("contents", [])
        for part in content.get("parts", [])
        if "text" in part
    ]


def declared(body: dict[str, Any]) -> list[str]:
    return [
        declaration["name"]
        for entry in body.get("tools", [])
        for declaration in entry.get("functionDeclarations", [])
    ]


def answer(body: dict[str, Any]) -> ScriptedReply:
    """A tool call of the request's own tool until TURNS results came, then its session."""
    (name,) = declared(body)
    results = sum(
        "functionResponse" in part
        for content in body["contents"]
        for part in content.get("parts", [])
    )
    if results < TURNS:
        return tool_call(name, {"item": name})
    return reply(f"answered {name}")


async def test_sessions_sharing_one_gemini_model_each_send_their_own_contents_and_tools() -> None:
    async with ScriptedModel(answer, api="gemini") as server:
        model = server.chat_model()
        assert isinstance(model, GeminiModel)
        dones: dict[str, Any] = {}

        async def session(name: str) -> None:
            agent = SAgent(model=model, run_script=False)
            user = [{"role": "user", "content": f"question of {name}"}]
            dones[name] = done_of(await collect(agent, user, tool_manager=manager_of(name)))

        async with anyio.create_task_group() as tg:
            for name in SESSIONS:
                tg.start_soon(session, name)
        assert len(server.requests) == len(SESSIONS) * (TURNS + 1)
        for body in server.requests:
            (name,) = declared(body)
            session_name = name.removeprefix("probe_")
            assert texts(body)[0] == f"question of {session_name}"
            assert all(session_name in text or "probe" in text for text in texts(body)), body
        for name in SESSIONS:
            assert dones[name].reason == "stop", dones[name].error
            assert dones[name].messages[-1]["content"] == f"answered probe_{name}"


async def test_a_declaration_the_adapter_keeps_is_not_changed_by_sending_it() -> None:
    spec = SEARCH
    async with ScriptedModel([reply("one"), reply("two")], api="gemini") as server:
        model = server.chat_model()
        assert isinstance(model, GeminiModel)
        request = ModelRequest(
            messages=(Message(role="user", parts=(TextPart(text="go"),)),), tools=(spec,)
        )
        kept = model._exported(spec, "search")
        for _ in range(2):
            await model_events(model, request)
        assert server.requests[0] == server.requests[1]
        assert model._exported(spec, "search") is kept
        assert kept == _declaration(spec, "search")


@pytest.mark.parametrize("api", ["anthropic", "responses"])
async def test_a_tool_export_the_adapter_keeps_is_not_changed_by_sending_it(api: str) -> None:
    export = to_anthropic_tool if api == "anthropic" else to_responses_tool
    async with ScriptedModel([reply("one"), reply("two")], api=api) as server:  # type: ignore[arg-type]
        model = server.chat_model()
        request = ModelRequest(
            messages=(Message(role="user", parts=(TextPart(text="go"),)),), tools=(SEARCH,)
        )
        for _ in range(2):
            await model_events(model, request)
        assert server.requests[0] == server.requests[1]
        assert model._exported(SEARCH, "search") == export(SEARCH, name="search")


def sent_properties(api: str, body: dict[str, Any]) -> list[str]:
    """The parameter names of the one tool a request declares, where each API puts them."""
    if api == "anthropic":
        (sent,) = body["tools"]
        return list(sent["input_schema"]["properties"])
    if api == "responses":
        (sent,) = body["tools"]
        return list(sent["parameters"]["properties"])
    (sent,) = body["tools"][0]["functionDeclarations"]
    schema = sent.get("parameters") or sent["parametersJsonSchema"]
    return list(schema["properties"])


@pytest.mark.parametrize("api", ["anthropic", "responses", "gemini"])
async def test_a_tool_whose_schema_changes_between_calls_is_sent_as_it_is_now(api: str) -> None:
    # the same name and description, a new schema object, then that object changed in place
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    versions = [
        ToolSpec(name="search", description="Search.", input_schema=schema),
        ToolSpec(
            name="search",
            description="Search.",
            input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
        ),
    ]
    async with ScriptedModel([reply("a"), reply("b"), reply("c")], api=api) as server:  # type: ignore[arg-type]
        model = server.chat_model()
        message = Message(role="user", parts=(TextPart(text="go"),))
        for spec in versions:
            await model_events(model, ModelRequest(messages=(message,), tools=(spec,)))
        schema["properties"] = {"limit": {"type": "integer"}}  # the first spec's, in place
        await model_events(model, ModelRequest(messages=(message,), tools=(versions[0],)))
    sent = [sent_properties(api, body) for body in server.requests]
    assert sent == [["q"], ["query"], ["limit"]]
