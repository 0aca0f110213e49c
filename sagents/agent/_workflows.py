"""``workflow_select`` in the agent loop: the way to go for this request (docs/agent.md,
"Workflow selection").

With ``SAgent(workflows=[Workflow(...)], workflow_select=True)``, before the first turn of each
request the session's workflows and skills are ranked against the request
(:func:`sagents.agent._suggest.rank_workflows`, offline), or the model picks one
(``workflow_select="model"``: one call without tools,
:func:`sagents.agent._selectors.choose_workflow_with_model`, which falls back to the offline
choice when the call fails or its answer names nothing listed). The choice enters that
request's system prompt: a workflow's steps, or a skill's instructions as ``load_skill``
returns them (the skill is loaded: projected into the sandbox, its ``allowed-tools`` applied to
the session). Below the threshold nothing is chosen. Either way the run emits
``workflow.selected`` and sets ``audit_status["selected_workflow"]``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal, TypeAlias

import anyio.to_thread

from sagents.agent._chat_model import ChatModel
from sagents.agent._events import WorkflowSelectedEvent
from sagents.agent._run import ActiveRun
from sagents.agent._selectors import choose_workflow_with_model
from sagents.agent._suggest import (
    DEFAULT_WORKFLOW_THRESHOLD,
    Workflow,
    WorkflowChoice,
    rank_workflows,
)
from sagents.agent._suggestion import request_query
from sagents.errors import SkillError

__all__ = ["WorkflowSelect", "WorkflowSelection", "workflow_fragment"]

logger = logging.getLogger(__name__)

WorkflowSelect: TypeAlias = bool | Literal["offline", "model"]
"""``workflow_select``: False (off), True or ``offline`` (the offline ranking), ``model``."""


class WorkflowSelection:
    """An agent's workflows and how one is chosen per request.

    Args:
        workflows: The agent's workflows (the session's skills are candidates too).
        how: See :data:`WorkflowSelect` (not False).
        threshold: The least offline score (0 to 1) that counts as a fit.
        model: The model asked when ``how`` is ``model``.

    Raises:
        TypeError: a workflow is not a :class:`~sagents.agent._suggest.Workflow`.
        ValueError: ``how`` is not one of the accepted values; two workflows share a name.
    """

    def __init__(
        self,
        workflows: Sequence[Workflow],
        *,
        how: WorkflowSelect,
        threshold: float = DEFAULT_WORKFLOW_THRESHOLD,
        model: ChatModel | None = None,
    ) -> None:
        if how not in (True, "offline", "model"):
            raise ValueError(f"workflow_select must be True, 'offline' or 'model', not {how!r}")
        names: set[str] = set()
        for workflow in workflows:
            if not isinstance(workflow, Workflow):
                raise TypeError(
                    "workflows takes sagents.agent.Workflow values "
                    f"(Workflow(name=..., description=..., steps=[...])), not {workflow!r}"
                )
            if workflow.name in names:
                raise ValueError(f"two workflows are named {workflow.name!r}; names must differ")
            names.add(workflow.name)
        self.workflows = tuple(workflows)
        self.how = how
        self.threshold = threshold
        self.model = model

    async def select(self, run: ActiveRun) -> str:
        """Choose for this request, emit ``workflow.selected``, record it in ``audit_status``.

        Returns:
            The fragment of this request's system prompt ("" when nothing was chosen).
        """
        state = run.session
        query = request_query(state.messages, every_turn=False)
        skills = state.skill_source if state.skills is not None else None
        ranked = await anyio.to_thread.run_sync(rank_workflows, query, self.workflows, skills)
        choice = ranked[0] if ranked and ranked[0].score >= self.threshold else None
        if self.how == "model" and self.model is not None and ranked and query:
            choice = await choose_workflow_with_model(
                self.model, query, self.workflows, skills, threshold=self.threshold
            )
        fragment = await self._fragment(run, choice) if choice is not None else ""
        if not fragment:
            choice = None
        state.audit_status["selected_workflow"] = None if choice is None else choice.name
        score = choice.score if choice is not None else ranked[0].score if ranked else None
        await run.emit(
            WorkflowSelectedEvent(
                name=None if choice is None else choice.name,
                kind=None if choice is None else choice.kind,
                score=score,
            )
        )
        return fragment

    async def _fragment(self, run: ActiveRun, choice: WorkflowChoice) -> str:
        if choice.kind == "workflow":
            workflow = next(w for w in self.workflows if w.name == choice.name)
            return workflow_fragment(workflow)
        skills = run.session.skills
        if skills is None:
            return ""
        try:
            loaded = await skills.load(choice.name)  # as load_skill: projected, allowed-tools on
        except SkillError as error:
            logger.warning("could not load the chosen skill %r: %s", choice.name, error)
            return ""
        return f"Skill for this request (already loaded):\n{loaded.to_text()}"


def workflow_fragment(workflow: Workflow) -> str:
    """A chosen workflow as its part of the system prompt: a header line, the description,
    then one numbered item per step.

    The workflow's text cannot change that shape: the name and description are put on one
    line each, and a step's further lines are indented under its number (a Markdown list
    item's continuation), so that no text of a workflow starts a line of its own that reads
    as another header, description or step.
    """
    lines = [f"Workflow for this request: {_one_line(workflow.name)}"]
    if workflow.description.strip():
        lines.append(_one_line(workflow.description))
    steps = [step for step in workflow.steps if step.strip()]
    if steps:
        lines.append("Steps:")
        for number, step in enumerate(steps, 1):
            first, *rest = step.strip().splitlines()
            lines.append(f"{number}. {first.strip()}")
            lines.extend(f"   {line.strip()}" for line in rest if line.strip())
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())
