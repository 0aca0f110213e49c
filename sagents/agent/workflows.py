"""``workflow_select`` in the agent loop: the way to go for this request (docs/agent.md,
"Workflow selection").

With ``SAgent(workflows=[Workflow(...)], workflow_select=True)``, before the first turn of each
request the session's workflows and skills are ranked against the request
(:func:`sagents.agent.suggest.rank_workflows`, offline), or the model picks one
(``workflow_select="model"``: one call without tools, falling back to the offline choice when
its answer names nothing known). The choice enters that request's system prompt: a workflow's
steps, or a skill's instructions as ``load_skill`` returns them (the skill is loaded: projected
into the sandbox, its ``allowed-tools`` applied to the session). Below the threshold nothing is
chosen. Either way the run emits ``workflow.selected`` and sets
``audit_status["selected_workflow"]``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import aclosing
from typing import Final, Literal, TypeAlias

import anyio.to_thread

from sagents.agent._run import RunState
from sagents.agent.events import WorkflowSelectedEvent
from sagents.agent.model import ModelTurn, OpenAIChatModel, TextDelta
from sagents.agent.suggest import (
    DEFAULT_WORKFLOW_THRESHOLD,
    Workflow,
    WorkflowChoice,
    rank_workflows,
)
from sagents.agent.suggestion import request_query
from sagents.errors import SagentsError, SkillError

__all__ = ["WORKFLOW_SELECT_PROMPT", "WorkflowSelect", "WorkflowSelection"]

logger = logging.getLogger(__name__)

WorkflowSelect: TypeAlias = bool | Literal["offline", "model"]
"""``workflow_select``: False (off), True or ``offline`` (the offline ranking), ``model``."""

WORKFLOW_SELECT_PROMPT = (
    "You choose how an assistant should handle a user's request. Below are the workflows and "
    "skills it can follow. Reply with the exact name of the one that fits the request, and "
    "nothing else; reply none when none of them fits."
)
"""The system prompt of the model's pick (``workflow_select="model"``)."""

_SUMMARY_CHARS: Final = 300  # characters of each candidate's description shown to the model


class WorkflowSelection:
    """An agent's workflows and how one is chosen per request.

    Args:
        workflows: The agent's workflows (the session's skills are candidates too).
        how: See :data:`WorkflowSelect` (not False).
        threshold: The least offline score (0 to 1) that counts as a fit.
        model: The model asked when ``how`` is ``model``.

    Raises:
        TypeError: a workflow is not a :class:`~sagents.agent.suggest.Workflow`.
        ValueError: ``how`` is not one of the accepted values; two workflows share a name.
    """

    def __init__(
        self,
        workflows: Sequence[Workflow],
        *,
        how: WorkflowSelect,
        threshold: float = DEFAULT_WORKFLOW_THRESHOLD,
        model: OpenAIChatModel | None = None,
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

    async def select(self, run: RunState) -> str:
        """Choose for this request, emit ``workflow.selected``, record it in ``audit_status``.

        Returns:
            The fragment of this request's system prompt ("" when nothing was chosen).
        """
        state = run.session
        query = request_query(state.messages, every_turn=False)
        skills = state.skill_source if state.skills is not None else None
        ranked = await anyio.to_thread.run_sync(rank_workflows, query, self.workflows, skills)
        choice = ranked[0] if ranked and ranked[0].score >= self.threshold else None
        if self.how == "model" and ranked and query:
            described = {("workflow", w.name): w.description for w in self.workflows}
            for skill in skills.list_skills() if skills is not None else []:
                described[("skill", skill.name)] = skill.description
            choice = await self._model_choice(query, ranked, described, fallback=choice)
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

    async def _fragment(self, run: RunState, choice: WorkflowChoice) -> str:
        if choice.kind == "workflow":
            workflow = next(w for w in self.workflows if w.name == choice.name)
            lines = [f"Workflow for this request: {workflow.name}"]
            if workflow.description:
                lines.append(workflow.description)
            if workflow.steps:
                lines.append("Steps:")
                lines.extend(f"{number}. {step}" for number, step in enumerate(workflow.steps, 1))
            return "\n".join(lines)
        skills = run.session.skills
        if skills is None:
            return ""
        try:
            loaded = await skills.load(choice.name)  # as load_skill: projected, allowed-tools on
        except SkillError as error:
            logger.warning("could not load the chosen skill %r: %s", choice.name, error)
            return ""
        return f"Skill for this request (already loaded):\n{loaded.to_text()}"

    async def _model_choice(
        self,
        query: str,
        ranked: Sequence[WorkflowChoice],
        described: dict[tuple[str, str], str],
        *,
        fallback: WorkflowChoice | None,
    ) -> WorkflowChoice | None:
        """The model's pick among ``ranked``; ``fallback`` when it names nothing known."""
        lines = []
        for candidate in ranked:
            description = " ".join(described.get((candidate.kind, candidate.name), "").split())
            line = f"- {candidate.name} ({candidate.kind}): {description[:_SUMMARY_CHARS]}"
            lines.append(line.rstrip())
        messages = [
            {"role": "system", "content": WORKFLOW_SELECT_PROMPT},
            {"role": "user", "content": f"Request: {query}\n\nChoices:\n" + "\n".join(lines)},
        ]
        try:
            answer = await self._answer(messages)
        except SagentsError as error:  # the provider failed: the offline choice stands
            logger.warning("the model could not choose a workflow: %s", error)
            return fallback
        picked = answer.strip().strip("`'\".").strip()
        if picked.lower() == "none":
            return None
        by_name = {c.name: c for c in ranked}
        by_folded = {c.name.casefold(): c for c in ranked}
        found = by_name.get(picked) or by_folded.get(picked.casefold())
        if found is None:
            logger.warning("the model chose no known workflow (%.100r); ranking offline", answer)
            return fallback
        return found

    async def _answer(self, messages: list[dict[str, str]]) -> str:
        assert self.model is not None
        parts: list[str] = []
        async with aclosing(self.model.stream_turn(messages)) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, ModelTurn) and not parts:
                    parts.append(str(event.message.get("content") or ""))
        return "".join(parts)
