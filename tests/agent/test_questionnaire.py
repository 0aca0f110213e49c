"""``questionnaire`` in the agent loop: an event the application answers, declines or cancels;
no answer in time is ``timed_out``; cancelling the run settles it."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sagents.agent import (
    AgentEvent,
    QuestionnaireRequestEvent,
    QuestionnaireResultEvent,
    SAgent,
)
from sagents.testing import ScriptedModel, reply, tool_call
from sagents.tool import SessionContext, ToolManager
from sagents.tool.impl import QuestionnaireSettings, register_builtin_tools
from sagents.tool.questions import Questionnaire, QuestionnaireAnswer
from tests.agent.helpers import RUN_TIMEOUT_S, assert_settled_once, done_of

pytestmark = pytest.mark.anyio

QUESTIONS = {
    "title": "Trip",
    "questions": [
        {
            "id": "city",
            "kind": "single_choice",
            "prompt": "Where to?",
            "options": ["Paris", "Rome"],
        },
        {
            "id": "extras",
            "kind": "multiple_choice",
            "prompt": "Extras?",
            "options": ["car", "hotel", "guide"],
            "required": False,
        },
        {"id": "nights", "kind": "number", "prompt": "Nights?", "integer": True, "minimum": 1},
        {"id": "notes", "kind": "text", "prompt": "Anything else?", "default": "none"},
    ],
}


def _manager(timeout: float = 30.0) -> ToolManager:
    manager = ToolManager()
    register_builtin_tools(
        manager,
        None,
        names=["questionnaire"],
        questionnaire=QuestionnaireSettings(timeout_seconds=timeout),
    )
    return manager


async def _run(
    on_request: Callable[[QuestionnaireRequestEvent, SAgent], object],
    *,
    arguments: dict[str, Any] | None = None,
    time_limit: float = 30.0,
    questioner: Any = None,
) -> tuple[list[AgentEvent], ScriptedModel]:
    script = [tool_call("questionnaire", arguments or QUESTIONS, id="c_q"), reply("thanks")]
    events: list[AgentEvent] = []
    async with ScriptedModel(script) as model:
        agent = SAgent(model=model.chat_model(), run_script=False)
        stream = agent.run_stream(
            [{"role": "user", "content": "plan my trip"}],
            tool_manager=_manager(time_limit),
            session_context=SessionContext(session_id="q"),
            questioner=questioner,
        )
        with anyio.fail_after(RUN_TIMEOUT_S):
            async with aclosing(stream):
                async for event in stream:
                    events.append(event)
                    if isinstance(event, QuestionnaireRequestEvent):
                        on_request(event, agent)
    return events, model


def _result(events: list[AgentEvent]) -> QuestionnaireResultEvent:
    [result] = [e for e in events if isinstance(e, QuestionnaireResultEvent)]
    return result


def _tool_text(model: ScriptedModel) -> str:
    return str(model.requests[-1]["messages"][-1]["content"])


async def test_answered_questions_come_back_checked_with_defaults_filled() -> None:
    def answer(event: QuestionnaireRequestEvent, agent: SAgent) -> None:
        assert event.questionnaire.title == "Trip"
        assert event.to_dict()["questionnaire"]["questions"][0]["options"] == ["Paris", "Rome"]
        event.answer({"city": "Rome", "extras": ["guide", "car"], "nights": "3"})

    events, model = await _run(answer)
    result = _result(events)
    assert result.status == "answered"
    assert result.answers == {
        "city": "Rome",
        "extras": ["car", "guide"],
        "nights": 3,
        "notes": "none",
    }
    text = _tool_text(model)
    assert "The user answered:" in text
    assert "city (Where to?): Rome" in text
    assert done_of(events).reason == "stop"
    assert_settled_once(done_of(events).messages)


async def test_an_invalid_answer_is_refused_to_the_application_at_once() -> None:
    problems: list[str] = []

    def answer(event: QuestionnaireRequestEvent, agent: SAgent) -> None:
        with pytest.raises(ValueError, match="'Oslo' is not one of") as caught:
            event.answer({"city": "Oslo", "nights": 2})
        problems.append(str(caught.value))
        event.answer({"city": "Paris", "nights": 2})

    events, _model = await _run(answer)
    assert problems
    assert _result(events).answers["city"] == "Paris"


async def test_declined() -> None:
    events, model = await _run(lambda event, agent: event.decline("not now"))
    assert _result(events).status == "declined"
    assert "declined to answer" in _tool_text(model)
    assert "not now" in _tool_text(model)


async def test_cancelled_by_the_application() -> None:
    events, model = await _run(lambda event, agent: event.cancel())
    assert _result(events).status == "cancelled"
    assert "cancelled" in _tool_text(model)


async def test_nobody_answering_in_time_is_timed_out() -> None:
    events, model = await _run(lambda event, agent: None, time_limit=0.2)
    assert _result(events).status == "timed_out"
    assert "Nobody answered" in _tool_text(model)
    assert json.loads(json.dumps(events[-1].to_dict()))["reason"] == "stop"


async def test_cancelling_the_run_settles_the_questionnaire_as_cancelled() -> None:
    events, _model = await _run(lambda event, agent: agent.cancel())
    assert _result(events).status == "cancelled"
    done = done_of(events)
    assert done.reason == "cancelled"
    assert_settled_once(done.messages)


async def test_the_applications_questioner_answers_too() -> None:
    class Form:
        def __init__(self) -> None:
            self.asked: list[tuple[Questionnaire, float]] = []

        async def ask(
            self, questionnaire: Questionnaire, *, time_limit: float
        ) -> QuestionnaireAnswer:
            self.asked.append((questionnaire, time_limit))
            return QuestionnaireAnswer(status="answered", answers={"city": "Paris", "nights": 1})

    form = Form()
    events, _model = await _run(lambda event, agent: None, questioner=form)
    assert _result(events).answers["city"] == "Paris"
    assert form.asked[0][1] == 30.0


async def test_an_invalid_questionnaire_is_refused_with_where() -> None:
    bad = {"questions": [{"id": "a", "kind": "single_choice", "prompt": "?", "options": ["x"]}]}
    events, model = await _run(lambda event, agent: None, arguments=bad)
    assert not [e for e in events if isinstance(e, QuestionnaireRequestEvent)]
    text = _tool_text(model)
    assert "invalid_arguments" in text
    assert "needs two options" in text


async def test_without_a_way_to_ask_the_tool_says_so() -> None:
    result = await _manager().run_tool("questionnaire", QUESTIONS, SessionContext())
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "not_allowed"
    assert "cannot reach the user" in result.text


async def test_a_sub_agent_asks_through_its_callers_run() -> None:
    manager = _manager()
    sub_script = [
        tool_call("questionnaire", QUESTIONS, id="sub_q"),
        reply("the user picked Rome"),
    ]
    async with ScriptedModel(sub_script) as sub_model:
        helper = SAgent(model=sub_model.chat_model(), run_script=False)
        manager.register_tool(helper.as_tool("planner", "Plans.", tools=["questionnaire"]))
        script = [tool_call("planner", {"task": "ask where"}, id="c_p"), reply("ok")]
        async with ScriptedModel(script) as model:
            agent = SAgent(model=model.chat_model(), run_script=False)
            events: list[AgentEvent] = []
            stream = agent.run_stream(
                [{"role": "user", "content": "plan"}],
                tool_manager=manager,
                session_context=SessionContext(session_id="sub"),
            )
            with anyio.fail_after(RUN_TIMEOUT_S):
                async with aclosing(stream):
                    async for event in stream:
                        events.append(event)
                        if isinstance(event, QuestionnaireRequestEvent):
                            event.answer({"city": "Rome", "nights": 2})
        answered = sub_model.requests[-1]["messages"][-1]["content"]
    assert "city (Where to?): Rome" in answered
    assert _result(events).status == "answered"
    assert done_of(events).reason == "stop"


class _Fixed:
    """A questioner that answers every questionnaire with one city."""

    def __init__(self, city: str) -> None:
        self.city = city
        self.asked = 0

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        self.asked += 1
        await anyio.lowlevel.checkpoint()  # both calls are in flight at once
        return QuestionnaireAnswer(status="answered", answers={"city": self.city, "nights": 1})


async def test_each_call_asks_the_questioner_its_session_context_carries() -> None:
    manager = _manager()
    paris, rome = _Fixed("Paris"), _Fixed("Rome")
    results: dict[str, str] = {}

    async def ask(questioner: _Fixed) -> None:
        context = SessionContext(session_id=questioner.city, questioner=questioner)
        result = await manager.run_tool("questionnaire", QUESTIONS, context)
        results[questioner.city] = result.text

    with anyio.fail_after(RUN_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, paris)
            tg.start_soon(ask, rome)
    assert (paris.asked, rome.asked) == (1, 1)
    assert "city (Where to?): Paris" in results["Paris"]
    assert "city (Where to?): Rome" in results["Rome"]
