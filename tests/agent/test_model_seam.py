"""The model seam: provider-neutral messages, ``ChatModel``, model strings, settings."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sagents.agent import (
    AnthropicModel,
    ChatModel,
    CompressionSettings,
    Finish,
    GeminiModel,
    Message,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ReasoningPart,
    SAgent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultPart,
    ToolSpec,
    Usage,
    UsageEvent,
    Workflow,
    choose_workflow_with_model,
    model_from_string,
)
from sagents.agent._selectors import LLMToolSelector
from sagents.errors import ModelConfigError
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, tool_call
from sagents.tool import SessionContext, ToolManager, tool
from sagents.tool.export_anthropic import to_anthropic_tool
from sagents.tool.export_gemini import to_gemini_function_declaration
from sagents.tool.export_responses import to_responses_tool
from tests.agent.helpers import assert_settled_once, collect, done_of, tool_messages

pytestmark = pytest.mark.anyio

AUTO = SessionContext(permission_mode="auto")


def weather_tools() -> ToolManager:
    @tool(permission="read_only")
    async def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    manager = ToolManager()
    manager.register_tool(get_weather)
    return manager


# -- messages -----------------------------------------------------------------------------------

OPENAI_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather?", "name": "ana"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "call the tool",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "user", "content": [{"type": "text", "text": "and this?"}, {"type": "image_url"}]},
    {"role": "assistant", "content": "Sunny."},
]


def test_openai_messages_round_trip_through_message_values() -> None:
    messages = [Message.from_openai(m) for m in OPENAI_HISTORY]
    assert [m.to_openai() for m in messages] == OPENAI_HISTORY
    assistant = messages[2]
    assert assistant.tool_calls == (
        ToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}'),
    )
    assert assistant.reasoning == "call the tool"
    assert messages[3].parts == (ToolResultPart(tool_call_id="c1", content="sunny"),)
    assert messages[4].text == "and this?"


def test_object_or_empty_arguments_become_json_strings() -> None:
    message = Message.from_openai(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "function": {"name": "f", "arguments": {"x": 1}}},
                {"id": "b", "function": {"name": "g", "arguments": ""}},
            ],
        }
    )
    assert [c.arguments for c in message.tool_calls] == ['{"x": 1}', "{}"]
    assert message.to_openai()["content"] == ""  # never null beside tool calls


def test_a_reasoning_part_keeps_its_signature_and_id() -> None:
    part = ReasoningPart(text="t", signature="sig==", id="rs_1", provider="anthropic")
    message = Message(role="assistant", parts=(part, TextPart(text="hi")))
    assert message.parts[0] == part
    assert message.to_openai() == {"role": "assistant", "content": "hi", "reasoning_content": "t"}


@pytest.mark.parametrize("role", ["robot", None])
def test_a_message_with_an_unknown_role_is_refused(role: Any) -> None:
    with pytest.raises(ValueError, match="role is one of"):
        Message.from_openai({"role": role, "content": "x"})
    with pytest.raises(ValueError, match="role is one of"):
        Message(role=role)


# -- any ChatModel ------------------------------------------------------------------------------


class PythonModel:
    """A ChatModel with no HTTP at all: a tool call, then the result's text."""

    model = "python"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]
        if results:
            text = f"it is {results[-1].content}"
            yield TextDelta(text=text)
            message = Message(role="assistant", parts=(TextPart(text=text),))
            yield Finish(response=ModelResponse(message=message, finish_reason="stop"))
            return
        call = ToolCall(id="p1", name=request.tools[0].name, arguments='{"city": "Rome"}')
        yield ToolCallStart(index=0, id=call.id, name=call.name)
        yield ToolCallEnd(index=0, call=call)
        yield Usage(prompt_tokens=3, completion_tokens=2)
        message = Message(role="assistant", parts=(call,))
        yield Finish(response=ModelResponse(message=message, finish_reason="tool_calls"))

    async def aclose(self) -> None:
        pass


async def test_the_loop_runs_on_any_chat_model_and_done_carries_messages_and_history() -> None:
    model = PythonModel()
    assert isinstance(model, ChatModel)
    agent = SAgent(model=model, system_prompt="You help.", run_script=False)
    history = [Message(role="user", parts=(TextPart(text="weather in Rome?"),))]
    events = await collect(agent, history, tool_manager=weather_tools(), session_context=AUTO)
    done = done_of(events)
    assert done.reason == "stop"
    assert_settled_once(done.messages)
    assert done.messages[0] == {"role": "user", "content": "weather in Rome?"}
    assert tool_messages(done.messages)[0]["content"] == "sunny in Rome"
    assert done.messages[-1]["content"] == "it is sunny in Rome"
    assert done.history == tuple(Message.from_openai(m) for m in done.messages)
    first = model.requests[0]
    assert first.system_prompt == "You help."
    assert [t.name for t in first.tools] == ["get_weather"]
    assert first.tools[0].input_schema["properties"]["city"]["type"] == "string"


async def test_selectors_and_workflow_selection_take_any_chat_model() -> None:
    class Answers:
        model = "answers"

        def __init__(self, text: str) -> None:
            self.text = text

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            message = Message(role="assistant", parts=(TextPart(text=self.text),))
            yield Finish(response=ModelResponse(message=message))

        async def aclose(self) -> None:
            pass

    specs = [ToolSpec(name="get_weather"), ToolSpec(name="save_file")]
    picked = await LLMToolSelector(Answers('["save_file"]')).select("store it", specs, 1)
    assert picked == ["save_file"]
    workflows = [
        Workflow(name="release", description="ship a release of the package", steps=["tag"]),
        Workflow(name="triage", description="sort the incoming bug reports", steps=["label"]),
    ]
    choice = await choose_workflow_with_model(
        Answers('{"name": "triage"}'), "sort these bug reports", workflows
    )
    assert choice is not None
    assert choice.name == "triage"


async def test_openai_chat_model_speaks_the_seam() -> None:
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, id="c9")
    async with ScriptedModel([ScriptedReply(content="let me see", tool_calls=(call,))]) as server:
        request = ModelRequest(
            system_prompt="be brief",
            messages=(Message(role="user", parts=(TextPart(text="weather?"),)),),
            tools=(ToolSpec(name="get_weather", description="the weather"),),
        )
        events = [e async for e in server.chat_model().stream(request)]
    assert [type(e) for e in events] == [
        TextDelta,
        TextDelta,
        ToolCallStart,
        ToolCallArgumentsDelta,
        ToolCallEnd,
        Usage,
        Finish,
    ]
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == "tool_calls"
    assert finish.response.message.text == "let me see"
    assert finish.response.message.tool_calls == (
        ToolCall(id="c9", name="get_weather", arguments='{"city": "Oslo"}'),
    )
    body = server.requests[0]
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["tools"][0]["function"]["name"] == "get_weather"


# -- settings and model strings -----------------------------------------------------------------


async def test_model_settings_reach_the_request() -> None:
    settings = ModelSettings(
        temperature=0.2, max_tokens=300, parallel_tool_calls=False, tool_choice="get_weather"
    )
    async with ScriptedModel([tool_call("get_weather", {"city": "A"}), "ok"]) as server:
        agent = SAgent(model=server.chat_model(), model_settings=settings, run_script=False)
        await collect(
            agent,
            [{"role": "user", "content": "go"}],
            tool_manager=weather_tools(),
            session_context=AUTO,
        )
    body = server.requests[0]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 300
    assert body["parallel_tool_calls"] is False
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_model_strings_name_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert model_from_string("openai:gpt-4.1-mini").model == "gpt-4.1-mini"
    assert model_from_string("llama3.1:8b").model == "llama3.1:8b"  # a bare name, colon and all
    monkeypatch.setenv("SAGENTS_MODEL", "openai:from-env")
    assert model_from_string().model == "from-env"
    assert OpenAIChatModel().model == "from-env"
    agent = SAgent(model="openai:qwen2.5", run_script=False)
    assert isinstance(agent.model, OpenAIChatModel)
    assert agent.model.model == "qwen2.5"


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("antropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
        ("gemni:gemini-2.5-flash", "gemini:gemini-2.5-flash"),
        ("openai-response:gpt-5-mini", "openai-responses:gpt-5-mini"),
        ("open-ai:gpt-4.1", "openai:gpt-4.1"),
        ("Anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
    ],
)
def test_a_misspelt_provider_is_a_clear_error_naming_the_one_meant(
    monkeypatch: pytest.MonkeyPatch, spec: str, meant: str
) -> None:
    # otherwise it is a Chat Completions model of that whole name, and the error says to set
    # OPENAI_BASE_URL (or the OpenAI endpoint answers 404) for a user who named another API
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ModelConfigError) as caught:
        SAgent(model=spec)
    assert spec.partition(":")[0] in caught.value.message
    assert meant in (caught.value.hint or "")
    # Ollama's names keep working: a bare name whose part before the colon is no provider
    for name in ("gemma:2b", "openchat:7b", "mistral:latest", "qwen2.5:7b-instruct"):
        assert model_from_string(name).model == name


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": -1}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2.5}, "max_tokens"),
        ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"tool_choice": ""}, "tool_choice"),
        ({"tool_choice": 123}, "tool_choice"),
    ],
)
def test_model_settings_that_no_provider_takes_are_refused_naming_the_field(
    settings: dict[str, Any], field: str
) -> None:
    # they were sent as they are: a 400 from the server at best, google-genai's pydantic error
    # at worst (an internal_error, "a bug in sagents", for temperature="hot" on Gemini)
    with pytest.raises(ValueError, match=field):
        ModelSettings(**settings)
    ModelSettings(temperature=0, max_tokens=1, parallel_tool_calls=False, tool_choice="auto")


def test_the_responses_and_gemini_strings_name_their_adapters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sagents.agent import GeminiModel, OpenAIResponsesModel

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    responses = SAgent(model="openai-responses:gpt-5-mini").model
    assert isinstance(responses, OpenAIResponsesModel)
    assert responses.model == "gpt-5-mini"
    assert responses.base_url.startswith("http://127.0.0.1:9/v1")
    gemini = SAgent(model="gemini:gemini-2.5-flash").model
    assert isinstance(gemini, GeminiModel)
    assert gemini.model == "gemini-2.5-flash"


def test_a_gemini_model_without_a_key_or_its_sdk_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="GEMINI_API_KEY"):
        SAgent(model="gemini:gemini-2.5-flash")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    monkeypatch.setitem(sys.modules, "google.genai", None)  # `import google.genai` fails
    with pytest.raises(ModelConfigError) as raised:
        SAgent(model="gemini:gemini-2.5-flash")
    assert "sagents[gemini]" in str(raised.value.hint)


def test_done_to_dict_stays_json_without_history() -> None:
    from sagents.agent import DoneEvent

    done = DoneEvent(reason="stop", messages=({"role": "user", "content": "x"},))
    assert json.loads(json.dumps(done.to_dict()))["messages"] == [{"role": "user", "content": "x"}]


async def test_the_calls_of_selection_and_compression_are_usage_events_too(
    tmp_path: Path,
) -> None:
    workflows = [
        Workflow(name="release", description="ship a release of the package", steps=["tag"]),
        Workflow(name="triage", description="sort the incoming bug reports", steps=["label"]),
    ]
    script = [
        ScriptedReply(content='{"name": "triage"}', prompt_tokens=70, completion_tokens=7),
        ScriptedReply(content="SUMMARY", prompt_tokens=200, completion_tokens=20),
        ScriptedReply(content="sorted", prompt_tokens=90, completion_tokens=3),
    ]
    history = [
        {"role": "user", "content": "sort these bug reports"},
        {"role": "assistant", "content": "Which ones?"},
        {"role": "user", "content": "the new ones, and sort these bug reports by area"},
    ]
    async with ScriptedModel(script) as server:
        agent = SAgent(
            model=server.chat_model(),
            workflows=workflows,
            workflow_select="model",
            run_script=False,
            max_history_tokens=40,
            compression=CompressionSettings(keep_recent_tokens=5, records_dir=tmp_path),
        )
        events = await collect(agent, history, session_context=AUTO)
    assert done_of(events).reason == "stop"
    usage = [(e.purpose, e.prompt_tokens) for e in events if isinstance(e, UsageEvent)]
    assert usage == [
        ("workflow_selection", 70),
        ("compression", 200),
        ("turn", 90),
    ]


def _sent_tools(model: ChatModel, spec: ToolSpec) -> list[dict[str, Any]]:
    """The tools a request offering ``spec`` sends, in the adapter's API form."""
    request = ModelRequest(tools=(spec,))
    if isinstance(model, GeminiModel):
        _contents, config = model.request_parts(request)
        declarations: list[dict[str, Any]] = config["tools"][0]["function_declarations"]
        return declarations
    assert isinstance(model, AnthropicModel | OpenAIResponsesModel)
    tools: list[dict[str, Any]] = model.request_body(request)["tools"]
    return tools


@pytest.mark.parametrize(
    ("model", "export"),
    [
        (
            lambda: AnthropicModel("claude-x", api_key="k", base_url="http://127.0.0.1:9"),
            to_anthropic_tool,
        ),
        (
            lambda: OpenAIResponsesModel("gpt-5", api_key="k", base_url="http://127.0.0.1:9/v1"),
            to_responses_tool,
        ),
        (
            lambda: GeminiModel("gemini-2.5-flash", api_key="k", base_url="http://127.0.0.1:9"),
            to_gemini_function_declaration,
        ),
    ],
    ids=["anthropic", "responses", "gemini"],
)
def test_tools_are_exported_once_per_schema_and_again_when_it_changes(
    model: Callable[[], ChatModel], export: Callable[..., dict[str, Any]]
) -> None:
    # each adapter keeps its tools' exports: the loop offers the same tools on every request
    adapter = model()
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    spec = ToolSpec(name="lookup", description="Look a key up.", input_schema=schema)
    exported = [export(spec, name="lookup")]
    first = _sent_tools(adapter, spec)
    again = _sent_tools(adapter, spec)
    assert again == first == exported
    again[0]["description"] = "changed by a caller"  # each request gets its own tool dicts
    assert first == _sent_tools(adapter, spec) == exported
    wider = {**schema, "required": ["key"]}
    changed = ToolSpec(name="lookup", description="Look a key up.", input_schema=wider)
    assert _sent_tools(adapter, changed) == [export(changed, name="lookup")] != exported
