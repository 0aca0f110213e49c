"""Tool suggestion in the agent loop: k tools advertised, expansion, enforcement at execution,
an append-only tool list (docs/agent.md, "Tool suggestion").

Driven through ``SAgent.run_stream`` against the scripted model on the real ``openai`` client;
the requests the model received are the evidence.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from sagents.agent import LLMToolSelector, ModelSettings, SAgent
from sagents.core._spec import ToolSpec
from sagents.skill import SkillManager, SkillProxy
from sagents.testing import ScriptedModel, ScriptedReply, ScriptedToolCall, reply, tool_call
from sagents.tool import SessionContext, ToolManager, ToolProxy, tool
from tests.agent.helpers import assert_settled_once, collect, done_of, tool_messages

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@tool(permission="read_only")
def get_weather(city: str) -> str:
    """The current weather of a city."""
    RAN.append("get_weather")
    return f"sunny in {city}"


@tool(permission="read_only")
def get_time(city: str) -> str:
    """The local time in a city."""
    RAN.append("get_time")
    return f"noon in {city}"


@tool(permission="read_only")
def convert_currency(amount: float, to: str) -> str:
    """Convert money between currencies."""
    RAN.append("convert_currency")
    return f"{amount} {to}"


@tool(permission="write")
def send_email(to: str, body: str) -> str:
    """Send an email."""
    RAN.append("send_email")
    return f"sent to {to}"


@tool(permission="read_only")
def secret_report() -> str:
    """A report this session must never see."""
    RAN.append("secret_report")
    return "secret"


TOOLS = (get_weather, get_time, convert_currency, send_email, secret_report)


def _manager() -> ToolManager:
    manager = ToolManager()
    for fn in TOOLS:
        manager.register_tool(fn)
    return manager


def keyword_suggester(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
    """A stand-in ranking: tools whose name shares a word with the query, in input order."""
    words = set(query.lower().replace("?", " ").split())
    return [t.name for t in tools if words & set(t.name.split("_"))][:k]


def _agent(model: ScriptedModel, **options: Any) -> SAgent:
    options.setdefault("max_tools_per_turn", 2)
    options.setdefault("tool_suggester", keyword_suggester)
    return SAgent(model=model.chat_model(), run_script=False, **options)


def _names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def _structured(message: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(message["content"])
    return value


ASK_WEATHER = [{"role": "user", "content": "what is the weather in Paris"}]
WITHOUT_SECRET = ["get_weather", "get_time", "convert_currency", "send_email"]


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    RAN.clear()


async def test_a_turn_advertises_only_the_suggested_tools_and_the_expansion_tool() -> None:
    async with ScriptedModel([reply("Sunny.")]) as model:
        done = done_of(await collect(_agent(model), ASK_WEATHER, tool_manager=_manager()))
    assert _names(model.requests[0]) == ["get_weather", "tool_expand_tools"]
    assert done.audit_status["suggested_tools"] == ["get_weather"]
    assert done.audit_status["tools_expanded"] is False


async def test_at_most_k_tools_are_suggested() -> None:
    def everything(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        return [t.name for t in tools]  # a ranking that ignores k: the loop still holds to it

    async with ScriptedModel([reply("ok")]) as model:
        agent = _agent(model, max_tools_per_turn=3, tool_suggester=everything)
        await collect(agent, ASK_WEATHER, tool_manager=_manager())
    names = _names(model.requests[0])
    assert names[-1] == "tool_expand_tools"
    assert len(names) == 3 + 1


async def test_an_allowed_but_unadvertised_tool_is_refused_with_the_expand_hint() -> None:
    async with ScriptedModel([tool_call("get_time", {"city": "Paris"}), reply("ok")]) as model:
        done = done_of(await collect(_agent(model), ASK_WEATHER, tool_manager=_manager()))
    assert_settled_once(done.messages)
    (refused,) = tool_messages(done.messages)
    assert "not_allowed" in refused["content"]
    assert 'tool_expand_tools({"tool_names": ["get_time"]})' in refused["content"]
    assert RAN == []  # narrowing is enforced at execution, not only in the schema list


async def test_the_tool_tool_choice_names_is_offered_and_runs_though_not_suggested() -> None:
    script = [tool_call("get_time", {"city": "Paris"}), reply("ok")]
    async with ScriptedModel(script) as model:
        agent = _agent(model, model_settings=ModelSettings(tool_choice="get_time"))
        done = done_of(await collect(agent, ASK_WEATHER, tool_manager=_manager()))
    assert done.reason == "stop", done.error
    assert _names(model.requests[0]) == ["get_weather", "tool_expand_tools", "get_time"]
    assert RAN == ["get_time"]


async def test_tool_expand_tools_reports_expanded_invalid_and_already_selected_names() -> None:
    asked = {"tool_names": ["get_time", "no_such_tool", "get_weather", "get_time"]}
    async with ScriptedModel([tool_call("tool_expand_tools", asked), reply("ok")]) as model:
        done = done_of(
            await collect(
                _agent(model),
                ASK_WEATHER,
                tool_manager=ToolProxy([_manager()], available_tools=WITHOUT_SECRET),
            )
        )
    (result,) = tool_messages(done.messages)
    assert _structured(result) == {
        "success": True,
        "expanded_tools": ["get_time"],
        "invalid_tools": ["no_such_tool"],
        "already_selected_tools": ["get_weather"],
        "available_expandable_tools": ["convert_currency", "send_email"],
    }
    assert done.audit_status["suggested_tools"] == ["get_weather", "get_time"]
    assert done.audit_status["tools_expanded"] is True


async def test_the_next_request_advertises_the_expanded_tool_at_the_end_and_its_call_runs() -> None:
    script = [
        tool_call("tool_expand_tools", {"tool_names": ["get_time"]}),
        tool_call("get_time", {"city": "Paris"}),
        reply("noon"),
    ]
    async with ScriptedModel(script) as model:
        done = done_of(await collect(_agent(model), ASK_WEATHER, tool_manager=_manager()))
    assert _names(model.requests[0]) == ["get_weather", "tool_expand_tools"]
    assert _names(model.requests[1]) == ["get_weather", "tool_expand_tools", "get_time"]
    assert RAN == ["get_time"]
    assert tool_messages(done.messages)[-1]["content"] == "noon in Paris"


async def test_the_tool_list_is_byte_stable_and_append_only_across_turns_and_requests() -> None:
    script = [
        tool_call("tool_expand_tools", {"tool_names": ["send_email"]}),
        tool_call("get_weather", {"city": "Paris"}),
        reply("Sunny."),
        tool_call("get_time", {"city": "Oslo"}),
        reply("Noon."),
    ]
    context = SessionContext(session_id="s1", permission_mode="auto")
    async with ScriptedModel(script) as model:
        agent = _agent(model)
        manager = _manager()
        first = done_of(
            await collect(agent, ASK_WEATHER, tool_manager=manager, session_context=context)
        )
        later = [*first.messages, {"role": "user", "content": "and the time in Oslo"}]
        await collect(agent, later, tool_manager=manager, session_context=context)
    dumped = [[json.dumps(t, sort_keys=False) for t in r["tools"]] for r in model.requests]
    for before, after in itertools.pairwise(dumped):
        assert after[: len(before)] == before  # every list a prefix of the next
    assert _names(model.requests[-1]) == [
        "get_weather",
        "tool_expand_tools",
        "send_email",
        "get_time",
    ]


async def test_every_turn_suggestion_ranks_the_work_so_far_too() -> None:
    script = [
        ScriptedReply(
            tool_calls=(ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}),)
        ),
        reply("ok"),
    ]

    def by_result(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        return ["get_time"] if "sunny" in query else keyword_suggester(query, tools, k)

    async with ScriptedModel(script) as model:
        agent = _agent(model, tool_suggestion="every_turn", tool_suggester=by_result)
        await collect(agent, ASK_WEATHER, tool_manager=_manager())
    assert _names(model.requests[1]) == ["get_weather", "tool_expand_tools", "get_time"]


async def test_first_turn_suggestion_does_not_pick_again_within_a_request() -> None:
    queries: list[str] = []

    def recording(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        queries.append(query)
        return keyword_suggester(query, tools, k)

    script = [tool_call("get_weather", {"city": "Oslo"}), reply("ok")]
    async with ScriptedModel(script) as model:
        await collect(_agent(model, tool_suggester=recording), ASK_WEATHER, tool_manager=_manager())
    assert queries == ["what is the weather in Paris"]


async def test_always_included_tools_come_first_and_everything_fitting_needs_no_expansion() -> None:
    async with ScriptedModel([reply("ok")]) as model:
        agent = _agent(model, max_tools_per_turn=5, always_include_tools=["convert_currency"])
        await collect(
            agent,
            ASK_WEATHER,
            tool_manager=ToolProxy(
                [_manager()], available_tools=["get_weather", "convert_currency"]
            ),
        )
    assert _names(model.requests[0]) == ["convert_currency", "get_weather"]


async def test_async_suggesters_are_awaited() -> None:
    async def ranking(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        return ["convert_currency", "not_a_tool"]

    async with ScriptedModel([reply("ok")]) as model:
        await collect(_agent(model, tool_suggester=ranking), ASK_WEATHER, tool_manager=_manager())
    assert _names(model.requests[0]) == ["convert_currency", "tool_expand_tools"]


async def test_a_failing_suggester_leaves_the_expansion_tool() -> None:
    def broken(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        raise RuntimeError("index gone")

    async with ScriptedModel([reply("ok")]) as model:
        done = done_of(
            await collect(
                _agent(model, tool_suggester=broken), ASK_WEATHER, tool_manager=_manager()
            )
        )
    assert done.reason == "stop"
    assert _names(model.requests[0]) == ["tool_expand_tools"]


async def test_without_max_tools_per_turn_every_allowed_tool_is_sent() -> None:
    async with ScriptedModel([reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        await collect(agent, ASK_WEATHER, tool_manager=_manager())
    assert sorted(_names(model.requests[0])) == sorted(fn.__name__ for fn in TOOLS)


@pytest.mark.parametrize("bad", [0, -3])
def test_max_tools_per_turn_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="max_tools_per_turn must be at least 1"):
        SAgent(model=None, max_tools_per_turn=bad)  # type: ignore[arg-type]  # refused first


async def test_tool_names_that_are_not_a_list_of_strings_are_invalid_arguments() -> None:
    async with ScriptedModel(
        [tool_call("tool_expand_tools", {"tool_names": "get_time"}), reply("ok")]
    ) as model:
        done = done_of(await collect(_agent(model), ASK_WEATHER, tool_manager=_manager()))
    (result,) = tool_messages(done.messages)
    assert "invalid_arguments" in result["content"]
    assert done.audit_status["tools_expanded"] is False


# -- a name outside the allowed set is never expandable ------------------------------------------


def _skills(root: Path) -> SkillManager:
    folder = root / "weather"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: weather\ndescription: Use for weather questions.\n"
        "allowed-tools: get_weather get_time\n---\nLook at the sky.\n",
        encoding="utf-8",
    )
    skills = SkillManager()
    skills.add_skill_dir(root)
    return skills


async def _expand_then_call(
    name: str, **run: Any
) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    prefix = run.pop("prefix", [])
    script = [
        *prefix,
        tool_call("tool_expand_tools", {"tool_names": [name]}),
        tool_call(name, {}),
        reply("ok"),
    ]
    async with ScriptedModel(script) as model:
        done = done_of(await collect(_agent(model, max_tools_per_turn=1), ASK_WEATHER, **run))
    assert_settled_once(done.messages)
    results = tool_messages(done.messages)
    return _structured(results[-2]), str(results[-1]["content"]), model.requests


async def test_a_tool_outside_the_proxy_whitelist_is_never_expandable() -> None:
    proxy = ToolProxy([_manager()], available_tools=WITHOUT_SECRET)
    expansion, called, requests = await _expand_then_call("secret_report", tool_manager=proxy)
    assert expansion["invalid_tools"] == ["secret_report"]
    assert "secret_report" not in expansion["available_expandable_tools"]
    assert "not_allowed" in called or "unknown_tool" in called
    assert "tool_expand_tools" not in called  # no hint to expand what can never be expanded
    assert all("secret_report" not in _names(r) for r in requests)
    assert RAN == []


async def test_a_write_tool_is_never_expandable_in_read_only_mode() -> None:
    expansion, called, _ = await _expand_then_call(
        "send_email",
        tool_manager=_manager(),
        session_context=SessionContext(permission_mode="read_only"),
    )
    assert expansion["invalid_tools"] == ["send_email"]
    assert "send_email" not in expansion["available_expandable_tools"]
    assert "not_allowed" in called
    assert RAN == []


async def test_a_tool_outside_an_active_skills_allowed_tools_is_never_expandable(
    tmp_path: Path,
) -> None:
    skills = SkillProxy(_skills(tmp_path / "skills"))
    expansion, called, requests = await _expand_then_call(
        "convert_currency",
        prefix=[tool_call("load_skill", {"name": "weather"})],
        tool_manager=ToolProxy([_manager()]),
        skill_manager=skills,
    )
    assert expansion["invalid_tools"] == ["convert_currency"]
    assert expansion["available_expandable_tools"] == ["get_time"]
    assert "not_allowed" in called or "unknown_tool" in called
    assert "convert_currency" not in _names(requests[-1])
    assert RAN == []


async def test_the_offline_ranking_is_the_default_suggester() -> None:
    async with ScriptedModel([reply("ok")]) as model:
        agent = SAgent(model=model.chat_model(), run_script=False, max_tools_per_turn=1)
        ask = [{"role": "user", "content": "How much is 20 dollars in euros?"}]
        await collect(agent, ask, tool_manager=_manager())
    assert _names(model.requests[0]) == ["convert_currency", "tool_expand_tools"]


async def test_a_tool_selector_object_is_asked_through_its_select_method() -> None:
    class Selector:
        async def select(self, query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
            return ["get_time"]

    async with ScriptedModel([reply("ok")]) as model:
        await collect(
            _agent(model, tool_suggester=Selector()), ASK_WEATHER, tool_manager=_manager()
        )
    assert _names(model.requests[0]) == ["get_time", "tool_expand_tools"]


async def test_an_expansion_takes_effect_in_the_next_turn_not_in_its_own_batch() -> None:
    batch = ScriptedReply(
        tool_calls=(
            ScriptedToolCall(name="tool_expand_tools", arguments={"tool_names": ["get_time"]}),
            ScriptedToolCall(name="get_time", arguments={"city": "Paris"}),
        )
    )
    script = [batch, tool_call("get_time", {"city": "Paris"}), reply("noon")]
    async with ScriptedModel(script) as model:
        done = done_of(await collect(_agent(model), ASK_WEATHER, tool_manager=_manager()))
    assert_settled_once(done.messages)
    expanded, refused, ran = tool_messages(done.messages)
    assert _structured(expanded)["expanded_tools"] == ["get_time"]
    assert "tool_expand_tools" in refused["content"]
    assert ran["content"] == "noon in Paris"
    assert RAN == ["get_time"]


async def test_the_llm_selector_picks_the_turns_tools_in_one_call_without_tools() -> None:
    script = [reply('["get_time", "not_a_tool"]'), reply("noon")]
    async with ScriptedModel(script) as model:
        chat_model = model.chat_model()
        agent = SAgent(
            model=chat_model,
            run_script=False,
            max_tools_per_turn=2,
            tool_suggester=LLMToolSelector(chat_model),
        )
        done = done_of(await collect(agent, ASK_WEATHER, tool_manager=_manager()))
    pick, turn = model.requests
    assert "tools" not in pick
    assert _names(turn) == ["get_time", "tool_expand_tools"]
    assert done.audit_status["suggested_tools"] == ["get_time"]


async def test_suggestion_and_expansion_over_a_real_mcp_server() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "sagents.demo.fleet_server"])
    script = [
        tool_call("tool_expand_tools", {"tool_names": ["fleet__list_devices"]}),
        tool_call("fleet__list_devices", {}),
        reply("500 devices."),
    ]
    ask = [{"role": "user", "content": "Is device SN0001 online? Check its status."}]
    async with ToolManager() as fleet, ScriptedModel(script) as model:
        await fleet.register_mcp_server(name="fleet", params=params)
        agent = SAgent(model=model.chat_model(), run_script=False, max_tools_per_turn=1)
        done = done_of(await collect(agent, ask, tool_manager=fleet))
    assert _names(model.requests[0]) == ["fleet__get_device_status", "tool_expand_tools"]
    assert _names(model.requests[1])[-1] == "fleet__list_devices"
    listing = tool_messages(done.messages)[-1]
    assert "SN0001" in listing["content"]
    assert done.audit_status["suggested_tools"] == [
        "fleet__get_device_status",
        "fleet__list_devices",
    ]


async def test_with_suggestion_run_script_lists_its_tools_and_scripts_still_call_them(
    tmp_path: Path,
) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "sagents.demo.fleet_server"])
    code = (
        "from agent_tools import call, tools\n"
        "names = sorted(t['name'] for t in tools())\n"
        "print(len(call('fleet__list_devices', {})['devices']), 'devices;', ', '.join(names))\n"
    )
    script = [
        tool_call("run_script", {"code": code, "tools": [], "description": "count devices"}),
        reply("500 devices."),
    ]
    ask = [{"role": "user", "content": "Is device SN0001 online? Check its status."}]
    context = SessionContext(session_id="rs", workspace=str(tmp_path / "ws"))
    async with ToolManager() as fleet, ScriptedModel(script) as model:
        await fleet.register_mcp_server(name="fleet", params=params)
        agent = SAgent(model=model.chat_model(), max_tools_per_turn=1)
        done = done_of(await collect(agent, ask, tool_manager=fleet, session_context=context))
    tools = {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}
    assert list(tools) == ["fleet__get_device_status", "run_script", "tool_expand_tools"]
    description = tools["run_script"]["description"]
    assert "  get_device_status(*, sn: str)" in description  # the condensed signatures
    assert "  list_devices()" in description
    assert "fleet__reboot_device" in description.split("Not callable from scripts")[1]
    (result,) = tool_messages(done.messages)
    assert "500 devices; fleet__get_device_status, fleet__list_devices" in result["content"]


def _signature_order(request: dict[str, Any]) -> list[str]:
    (description,) = (
        t["function"]["description"]
        for t in request["tools"]
        if t["function"]["name"] == "run_script"
    )
    return [
        line.strip().partition("(")[0]
        for line in description.splitlines()
        if line.startswith("  ")
        and "(" in line
        and not line.startswith("  from ")
        and not line.lstrip().startswith(("call", "progress", "tools()"))
    ]


async def test_with_suggestion_run_script_lists_the_requests_most_relevant_tools_first(
    tmp_path: Path,
) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "sagents.demo.fleet_server"])
    script = [
        tool_call("fleet__get_device_status", {"sn": "SN0001"}),
        reply("Online."),
        reply("500 devices."),
    ]
    context = SessionContext(session_id="rs", workspace=str(tmp_path / "ws"))
    status = "Is device SN0001 online? Check its status."
    listing = "List every device of the fleet, with its site and model."
    async with ToolManager() as fleet, ScriptedModel(script) as model:
        await fleet.register_mcp_server(name="fleet", params=params)
        agent = SAgent(model=model.chat_model(), max_tools_per_turn=1)
        first = done_of(
            await collect(
                agent,
                [{"role": "user", "content": status}],
                tool_manager=fleet,
                session_context=context,
            )
        )
        later = [*first.messages, {"role": "user", "content": listing}]
        await collect(agent, later, tool_manager=fleet, session_context=context)
    turn1, turn2, request2 = (_signature_order(r) for r in model.requests)
    assert turn1[0] == "get_device_status"
    assert turn2 == turn1  # within a request (first_turn) the description stays as it was
    dumped = [json.dumps(r["tools"]) for r in model.requests]
    assert dumped[1] == dumped[0]  # the whole tools array, byte for byte
    assert request2[0] == "list_devices"
    assert (
        sorted(request2)
        == sorted(turn1)
        == [
            "get_device_status",
            "list_devices",
            "set_device_config",
        ]
    )


async def test_a_failing_ranking_of_run_scripts_tools_lists_them_in_order_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sagents.agent._scripts as scripts

    def broken(query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        raise RuntimeError("index corrupted")

    monkeypatch.setattr(scripts, "suggest_tools", broken)
    params = StdioServerParameters(command=sys.executable, args=["-m", "sagents.demo.fleet_server"])
    context = SessionContext(session_id="rs", workspace=str(tmp_path / "ws"))
    ask = [{"role": "user", "content": "List every device of the fleet."}]
    async with ToolManager() as fleet, ScriptedModel([reply("500 devices.")]) as model:
        await fleet.register_mcp_server(name="fleet", params=params)
        agent = SAgent(model=model.chat_model(), max_tools_per_turn=1)
        done = done_of(await collect(agent, ask, tool_manager=fleet, session_context=context))
    assert done.messages[-1]["content"] == "500 devices."
    order = _signature_order(model.requests[0])
    assert sorted(order) == ["get_device_status", "list_devices", "set_device_config"]
    assert "run_script's tools could not be ranked" in caplog.text
