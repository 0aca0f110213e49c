"""``workflow_select`` in the agent loop: the chosen workflow's steps or skill's instructions in
the request's system prompt, ``workflow.selected``, ``audit_status.selected_workflow``
(docs/agent.md, "Workflow selection").

Driven through ``SAgent.run_stream`` against the scripted model on the real ``openai`` client,
with the offline ranking unless a test says otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sagents.agent import SAgent, Workflow, WorkflowSelectedEvent
from sagents.skill import SkillManager, SkillProxy
from sagents.testing import ScriptedModel, http_error, reply
from sagents.tool import SessionContext, ToolManager, ToolProxy, tool
from tests.agent.helpers import collect, done_of

pytestmark = pytest.mark.anyio

TRIAGE = Workflow(
    name="incident_triage",
    description="Triage a production incident: an outage, errors or alerts in a service.",
    steps=["Collect the alerts", "Find the failing service", "Write a summary for the on-call"],
)
RELEASE = Workflow(
    name="release_notes",
    description="Write release notes for a new version from the changelog.",
    steps=["Read the changelog", "Group the changes", "Write the notes"],
)
OUTAGE = [
    {
        "role": "user",
        "content": "Our checkout service is down with 500 errors, please triage the incident",
    }
]
UNRELATED = [{"role": "user", "content": "What is the capital of France?"}]


@tool(permission="read_only")
def get_weather(city: str) -> str:
    """The current weather of a city."""
    return f"sunny in {city}"


@tool(permission="read_only")
def convert_currency(amount: float, to: str) -> str:
    """Convert money between currencies."""
    return f"{amount} {to}"


def _manager() -> ToolManager:
    manager = ToolManager()
    manager.register_tool(get_weather)
    manager.register_tool(convert_currency)
    return manager


def _agent(model: ScriptedModel, **options: Any) -> SAgent:
    options.setdefault("workflows", [TRIAGE, RELEASE])
    options.setdefault("workflow_select", True)
    return SAgent(model=model.chat_model(), system_prompt="You help.", run_script=False, **options)


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def _selected(events: list[Any]) -> WorkflowSelectedEvent:
    (event,) = [e for e in events if isinstance(e, WorkflowSelectedEvent)]
    return event


async def test_the_chosen_workflows_steps_are_in_the_first_requests_system_prompt() -> None:
    async with ScriptedModel([reply("On it.")]) as model:
        events = await collect(_agent(model), OUTAGE, tool_manager=_manager())
    system = _system(model.requests[0])
    assert system.startswith("You help.")
    assert "Workflow for this request: incident_triage" in system
    assert "1. Collect the alerts\n2. Find the failing service\n3. Write a summary" in system
    assert "release_notes" not in system
    selected = _selected(events)
    assert (selected.name, selected.kind) == ("incident_triage", "workflow")
    assert selected.score is not None
    assert selected.score >= 0.3
    assert selected.to_dict()["type"] == "workflow.selected"
    assert done_of(events).audit_status["selected_workflow"] == "incident_triage"
    assert events.index(selected) < next(
        i for i, e in enumerate(events) if getattr(e, "type", "") == "message"
    )


async def test_an_unrelated_request_selects_nothing() -> None:
    async with ScriptedModel([reply("Paris.")]) as model:
        events = await collect(_agent(model), UNRELATED, tool_manager=_manager())
    assert _system(model.requests[0]) == "You help."
    selected = _selected(events)
    assert (selected.name, selected.kind) == (None, None)
    assert selected.score is not None
    assert selected.score < 0.3
    assert done_of(events).audit_status["selected_workflow"] is None


async def test_each_request_of_a_session_chooses_anew() -> None:
    context = SessionContext(session_id="s1")
    async with ScriptedModel([reply("On it."), reply("Paris.")]) as model:
        agent = _agent(model)
        first = done_of(
            await collect(agent, OUTAGE, tool_manager=_manager(), session_context=context)
        )
        later = [*first.messages, *UNRELATED]
        second = done_of(
            await collect(agent, later, tool_manager=_manager(), session_context=context)
        )
    assert "incident_triage" in _system(model.requests[0])
    assert _system(model.requests[1]) == "You help."
    assert second.audit_status["selected_workflow"] is None


def _skills(root: Path) -> SkillManager:
    folder = root / "currency-exchange"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: currency-exchange\ndescription: Convert money between currencies, "
        "exchange rates for dollars, euros and yen.\nallowed-tools: convert_currency\n---\n"
        "Always state the rate you used.\n",
        encoding="utf-8",
    )
    skills = SkillManager()
    skills.add_skill_dir(root)
    return skills


async def test_a_chosen_skill_enters_the_prompt_as_load_skill_returns_it_with_its_allowed_tools(
    tmp_path: Path,
) -> None:
    ask = [{"role": "user", "content": "Convert 20 dollars to euros at today's exchange rate"}]
    async with ScriptedModel([reply("18 EUR.")]) as model:
        events = await collect(
            _agent(model, workflows=[TRIAGE]),
            ask,
            tool_manager=ToolProxy([_manager()]),
            skill_manager=SkillProxy(_skills(tmp_path / "skills")),
        )
    system = _system(model.requests[0])
    assert "# Skill: currency-exchange" in system
    assert "Always state the rate you used." in system
    assert "While this skill is active you may call only: convert_currency" in system
    names = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "convert_currency" in names
    assert "get_weather" not in names  # the skill's allowed-tools applied to the session
    selected = _selected(events)
    assert (selected.name, selected.kind) == ("currency-exchange", "skill")


async def test_the_model_can_choose_in_one_call_without_tools() -> None:
    async with ScriptedModel(
        [reply('{"name": "release_notes"}'), reply("Here are the notes.")]
    ) as model:
        events = await collect(
            _agent(model, workflow_select="model"), OUTAGE, tool_manager=_manager()
        )
    pick, first_turn = model.requests
    assert "tools" not in pick
    assert "incident_triage (workflow)" in pick["messages"][1]["content"]
    assert "Workflow for this request: release_notes" in _system(first_turn)
    assert _selected(events).name == "release_notes"


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [('{"name": null}', None), ("I would pick the triage one", "incident_triage")],
)
async def test_a_model_answering_none_chooses_nothing_and_garbage_falls_back_offline(
    answer: str, chosen: str | None
) -> None:
    async with ScriptedModel([reply(answer), reply("ok")]) as model:
        events = await collect(
            _agent(model, workflow_select="model"), OUTAGE, tool_manager=_manager()
        )
    assert _selected(events).name == chosen


async def test_a_failing_model_pick_falls_back_to_the_offline_choice() -> None:
    async with ScriptedModel([http_error(401, "bad key"), reply("ok")]) as model:
        events = await collect(
            _agent(model, workflow_select="model"), OUTAGE, tool_manager=_manager()
        )
    assert _selected(events).name == "incident_triage"
    assert done_of(events).reason == "stop"


async def test_without_workflow_select_no_event_and_no_workflow_in_the_prompt() -> None:
    async with ScriptedModel([reply("ok")]) as model:
        events = await collect(
            _agent(model, workflow_select=False), OUTAGE, tool_manager=_manager()
        )
    assert not any(isinstance(e, WorkflowSelectedEvent) for e in events)
    assert _system(model.requests[0]) == "You help."


def test_bad_workflow_settings_are_refused_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match="Workflow"):
        SAgent(model=None, workflows=[{"name": "x"}], workflow_select=True)  # type: ignore[arg-type, list-item]  # checked first
    with pytest.raises(ValueError, match="workflow_select must be"):
        SAgent(model=None, workflows=[TRIAGE], workflow_select="sometimes")  # type: ignore[arg-type]  # checked first
    with pytest.raises(ValueError, match="two workflows are named 'incident_triage'"):
        SAgent(model=None, workflows=[TRIAGE, TRIAGE], workflow_select=True)  # type: ignore[arg-type]  # checked first
