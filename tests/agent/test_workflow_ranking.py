"""select_workflow / choose_workflow: which of a session's workflows and skills fits a request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest

from sagents.agent import (
    Workflow,
    WorkflowChoice,
    choose_workflow,
    choose_workflow_with_model,
    select_workflow,
)
from sagents.agent._suggest import DEFAULT_WORKFLOW_THRESHOLD, rank_workflows
from sagents.skill import SkillManager, SkillProxy
from sagents.testing import ScriptedModel, http_error, reply
from tests.skill.helpers import spec_md, write_skill

WORKFLOWS = [
    Workflow(
        name="bug_triage",
        description="Investigate a bug report or crash: reproduce it, find the cause, fix it.",
        steps=["Reproduce the problem.", "Find the commit that introduced it.", "Fix it."],
    ),
    Workflow(
        name="release",
        description="Cut a release of the package: bump the version, tag, build, publish.",
        steps=["Bump the version.", "Tag the commit.", "Publish to PyPI."],
    ),
    Workflow(
        name="expense_report",
        description="Turn receipts into an expense report and submit it for approval.",
        steps=["Read the receipts.", "Fill in the form.", "Submit it."],
    ),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("There is a crash when I open the settings page, can you look into it?", "bug_triage"),
        ("publish version 2.0 of the library", "release"),
        ("ship a new release to PyPI", "release"),
        ("submit my travel expenses", "expense_report"),
        ("I have these taxi and hotel receipts from my trip, file them", "expense_report"),
    ],
)
def test_the_workflow_that_fits_is_selected(query: str, expected: str) -> None:
    assert select_workflow(query, WORKFLOWS, None) == expected


@pytest.mark.parametrize(
    "query",
    [
        "what is the capital of France?",
        "hello",
        "translate 'good night' into Spanish",
        "tell me a joke",
        "what's the weather in Paris tomorrow",
    ],
)
def test_an_unrelated_request_selects_nothing(query: str) -> None:
    assert select_workflow(query, WORKFLOWS, None) is None
    ranked = rank_workflows(query, WORKFLOWS)
    assert ranked[0].score < DEFAULT_WORKFLOW_THRESHOLD


def test_the_choice_carries_kind_and_score_for_the_event() -> None:
    choice = choose_workflow("ship a new release to PyPI", WORKFLOWS)
    assert isinstance(choice, WorkflowChoice)
    assert choice.kind == "workflow"
    assert DEFAULT_WORKFLOW_THRESHOLD <= choice.score <= 1.0
    assert choice.to_dict() == {"name": "release", "kind": "workflow", "score": choice.score}


def test_the_threshold_decides_what_fits_well_enough() -> None:
    query = "ship a new release to PyPI"
    assert select_workflow(query, WORKFLOWS, None, threshold=1.01) is None
    assert select_workflow("hello", WORKFLOWS, None, threshold=0.0) is not None


def test_the_sessions_skills_are_candidates_too(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "pdf-forms",
        spec_md("pdf-forms", "Fill in PDF forms and extract their fields. Use for PDF forms."),
    )
    write_skill(
        tmp_path,
        "slides",
        spec_md("slides", "Build slide decks as PowerPoint files. Use for presentations."),
    )
    manager = SkillManager()
    manager.add_skill_dir(tmp_path)
    choice = choose_workflow("fill in this PDF form for me", WORKFLOWS, manager)
    assert choice is not None
    assert (choice.name, choice.kind) == ("pdf-forms", "skill")
    only_slides = SkillProxy(manager, available_skills=["slides"])
    assert select_workflow("fill in this PDF form for me", [], only_slides) is None
    assert select_workflow("make a PowerPoint presentation", [], only_slides) == "slides"
    listed = manager.list_skills()
    assert select_workflow("fill in this PDF form for me", [], listed) == "pdf-forms"


def test_nothing_to_choose_from_or_an_empty_request_selects_nothing() -> None:
    assert select_workflow("publish the release", [], None) is None
    assert select_workflow("", WORKFLOWS, None) is None
    assert rank_workflows("   ", WORKFLOWS) == [
        WorkflowChoice(name=w.name, kind="workflow", score=0.0) for w in WORKFLOWS
    ]


def test_a_workflow_is_validated() -> None:
    with pytest.raises(pydantic.ValidationError, match="name"):
        Workflow(name="", description="x", steps=[])
    with pytest.raises(pydantic.ValidationError, match="stepz"):
        Workflow.model_validate({"name": "w", "description": "d", "stepz": ["typo"]})
    assert Workflow(name="w", description="d").steps == []


# -- the model's choice ------------------------------------------------------------------------

WAIT_S = 30.0


@pytest.mark.anyio
async def test_the_model_may_choose_the_workflow() -> None:
    async with ScriptedModel([reply('{"name": "expense_report"}')]) as model:
        with anyio.fail_after(WAIT_S):
            choice = await choose_workflow_with_model(model.chat_model(), "file these", WORKFLOWS)
        listing = model.requests[0]["messages"][1]["content"]
    assert choice is not None
    assert (choice.name, choice.kind) == ("expense_report", "workflow")
    assert choice.score == next(
        c.score for c in rank_workflows("file these", WORKFLOWS) if c.name == "expense_report"
    )
    assert "- release (workflow): Cut a release" in listing


@pytest.mark.anyio
async def test_the_model_may_choose_none() -> None:
    async with ScriptedModel([reply('```json\n{"name": null}\n```')]) as model:
        with anyio.fail_after(WAIT_S):
            query = "ship a new release to PyPI"
            assert await choose_workflow_with_model(model.chat_model(), query, WORKFLOWS) is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        reply('{"name": "deploy_to_mars"}'),
        reply("the release one"),
        http_error(401),
        reply('{"name": ' + "{" * 10_000 + "}" * 10_000 + "}"),
    ],
    ids=["unknown", "garbage", "http-401", "nested-10000-deep"],
)
async def test_a_bad_model_answer_falls_back_to_the_offline_choice(answer: Any) -> None:
    query = "ship a new release to PyPI"
    async with ScriptedModel([answer]) as model:
        with anyio.fail_after(WAIT_S):
            choice = await choose_workflow_with_model(
                model.chat_model(max_retries=0), query, WORKFLOWS
            )
    assert choice == choose_workflow(query, WORKFLOWS)
    assert choice is not None
    assert choice.name == "release"
