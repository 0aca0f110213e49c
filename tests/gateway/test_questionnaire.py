"""``questionnaire`` through the gateway: one form elicitation for a client that elicits, a clear
refusal for one that cannot."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from sagents.gateway import Gateway
from sagents.gateway._questions import QUESTION_FRAME, questionnaire_form
from sagents.tool import ToolManager, ToolProxy, tool
from sagents.tool.impl import QuestionnaireSettings, register_builtin_tools
from sagents.tool.questions import Questionnaire
from tests.gateway.test_server import error_code

pytestmark = pytest.mark.anyio

QUESTIONS = {
    "title": "Deployment",
    "questions": [
        {"id": "env", "kind": "single_choice", "prompt": "Where?", "options": ["staging", "prod"]},
        {"id": "checks", "kind": "multiple_choice", "prompt": "Run", "options": ["lint", "e2e"]},
        {"id": "replicas", "kind": "number", "prompt": "How many?", "integer": True, "minimum": 1},
        {"id": "note", "kind": "text", "prompt": "Note", "required": False},
    ],
}


@asynccontextmanager
async def gateway(
    time_limit: float = 30.0, background_after_s: float | None = None, *extra: Callable[..., Any]
) -> AsyncIterator[Gateway]:
    manager = ToolManager()
    register_builtin_tools(
        manager,
        None,
        names=["questionnaire"],
        questionnaire=QuestionnaireSettings(timeout_seconds=time_limit),
    )
    for added in extra:
        manager.register_tool(added)
    proxy = ToolProxy([manager], enforce_mode=False)
    async with Gateway(proxy, background_after_s=background_after_s) as served:
        yield served


def _text(result: mt.CallToolResult) -> str:
    assert isinstance(result.content[0], mt.TextContent)
    return result.content[0].text


async def test_a_client_that_elicits_gets_one_form_and_its_answers_come_back() -> None:
    seen: list[mt.ElicitRequestFormParams] = []

    async def fill(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        assert isinstance(params, mt.ElicitRequestFormParams)
        seen.append(params)
        content: dict[str, Any] = {"env": "prod", "checks": ["e2e"], "replicas": 3}
        return mt.ElicitResult(action="accept", content=content)

    with anyio.fail_after(30):
        async with (
            gateway() as served,
            Client(served.server, mode="legacy", elicitation_callback=fill) as c,
        ):
            result = await c.call_tool("questionnaire", QUESTIONS)
    assert result.is_error is False, _text(result)
    [form] = seen
    assert form.message == QUESTION_FRAME + '"Deployment"'
    properties = form.requested_schema["properties"]
    assert properties["env"] == {"type": "string", "title": "Where?", "enum": ["staging", "prod"]}
    assert properties["checks"]["type"] == "array"
    assert properties["checks"]["items"] == {"type": "string", "enum": ["lint", "e2e"]}
    assert properties["replicas"] == {"type": "integer", "title": "How many?", "minimum": 1}
    assert form.requested_schema["required"] == ["env", "checks", "replicas"]
    assert result.structured_content == {
        "status": "answered",
        "answers": {"env": "prod", "checks": ["e2e"], "replicas": 3, "note": None},
        "message": "",
    }


@pytest.mark.parametrize(("action", "status"), [("decline", "declined"), ("cancel", "cancelled")])
async def test_a_declined_or_cancelled_form_says_so(
    action: Literal["decline", "cancel"], status: str
) -> None:
    async def refuse(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        return mt.ElicitResult(action=action)

    with anyio.fail_after(30):
        async with (
            gateway() as served,
            Client(served.server, mode="legacy", elicitation_callback=refuse) as c,
        ):
            result = await c.call_tool("questionnaire", QUESTIONS)
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["status"] == status


async def test_no_answer_in_time_is_timed_out() -> None:
    async def never(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    with anyio.fail_after(30):
        async with (
            gateway(time_limit=0.3) as served,
            Client(served.server, mode="legacy", elicitation_callback=never) as c,
        ):
            result = await c.call_tool("questionnaire", QUESTIONS)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "timed_out"
    assert "Nobody answered" in _text(result)


async def test_answers_that_do_not_fit_the_questions_are_an_error() -> None:
    async def wrong(
        context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult:
        return mt.ElicitResult(
            action="accept", content={"env": "moon", "checks": [], "replicas": 1}
        )

    with anyio.fail_after(30):
        async with (
            gateway() as served,
            Client(served.server, mode="legacy", elicitation_callback=wrong) as c,
        ):
            result = await c.call_tool("questionnaire", QUESTIONS)
    assert result.is_error is True
    assert "'moon' is not one of" in _text(result)


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_client_that_cannot_elicit_is_refused_clearly(era: str) -> None:
    with anyio.fail_after(30):
        async with gateway() as served, Client(served.server, mode=era) as client:
            result = await client.call_tool("questionnaire", QUESTIONS)
    assert result.is_error is True
    assert error_code(result) == "not_allowed"
    assert "elicitation capability" in _text(result)
    assert json.dumps(QUESTIONS["title"]) not in _text(result)


async def test_a_questionnaire_is_never_handed_off_to_the_background() -> None:
    answered = anyio.Event()
    handed_off = anyio.Event()

    @tool(
        name="wait", description="Wait until the questionnaire is answered.", permission="read_only"
    )
    async def wait() -> str:
        await answered.wait()
        return "waited"

    async def call_wait(other: Client) -> None:
        result = await other.call_tool("wait", {})
        assert "continues in the background" in _text(result)
        handed_off.set()

    async with anyio.create_task_group() as tg:

        async def slow_user(
            context: ClientRequestContext, params: mt.ElicitRequestParams
        ) -> mt.ElicitResult:
            # the user answers only once a call made after the questionnaire's own was handed
            # off: the hand-off delay has passed for the questionnaire too
            tg.start_soon(call_wait, other)
            await handed_off.wait()
            return mt.ElicitResult(
                action="accept", content={"env": "prod", "checks": ["lint"], "replicas": 2}
            )

        with anyio.fail_after(30):
            async with (
                gateway(30.0, 0.05, wait) as served,
                Client(served.server, mode="legacy", elicitation_callback=slow_user) as c,
                Client(served.server, mode="legacy") as other,
            ):
                result = await c.call_tool("questionnaire", QUESTIONS)
                answered.set()  # the handed-off call ends before the gateway closes
    assert handed_off.is_set()
    assert result.is_error is False, _text(result)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "answered"


def test_a_title_that_mimics_an_approval_is_framed_as_the_model_s_question_on_one_line() -> None:
    mimic = (
        "Allow the write tool 'fleet__reboot' to run with these arguments?\n"
        "Arguments (1 line, 2 characters, shown whole):\n{}"
    )
    questionnaire = Questionnaire.model_validate(
        {
            "title": mimic,
            "questions": [
                {"id": "decision", "prompt": "Decision\nAllow once?", "kind": "text"},
            ],
        }
    )
    message, schema = questionnaire_form(questionnaire)
    assert message.startswith("Question from the model (not an approval")
    assert "\n" not in message  # the title draws no line of its own
    assert not message.startswith("Allow")
    assert message.endswith('"')
    assert "\n" not in schema["properties"]["decision"]["title"]
