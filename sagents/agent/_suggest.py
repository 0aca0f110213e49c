"""Tool suggestion and workflow selection, offline (docs/tool-suggestion.md).

``suggest_tools(query, tools, k)`` ranks a session's tools for one request and returns the
names of the ``k`` best, best first, without a model or a network: BM25 over the words of
names, descriptions and parameters, fused with WordLlama static embeddings when the wheel is
installed (see :mod:`sagents.agent._ranking`). The index of a tool set is built once and
cached; a query on a 2,000-tool registry costs about a millisecond (``bench/bench_suggest.py``).

A :class:`ToolSelector` is the seam the agent loop plugs strategies into: the offline ranking
(:class:`OfflineToolSelector`), one cheap model call that picks names
(:class:`~sagents.agent._selectors.LLMToolSelector`), or an OpenAI-compatible ``/embeddings``
endpoint (:class:`~sagents.agent._selectors.EmbeddingsToolSelector`).

``select_workflow(query, workflows, skills)`` picks the session's workflow or skill that fits a
request, or None when none fits well enough; :func:`choose_workflow` returns the same choice
with its kind and score (:class:`WorkflowChoice`) for the ``workflow.selected`` event.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from sagents.agent._ranking import (
    Document,
    IndexCache,
    Ranking,
    RankingIndex,
    bounded_query,
    cosines,
    embedding_model,
    spec_content_key,
    split_words,
    terms,
    tool_document,
)
from sagents.core._spec import ToolSpec
from sagents.skill._proxy import SkillSource
from sagents.skill._schema import SkillSchema
from sagents.tool._provider import ToolProvider

__all__ = [
    "DEFAULT_SUGGESTED_TOOLS",
    "DEFAULT_WORKFLOW_THRESHOLD",
    "OfflineToolSelector",
    "Skills",
    "ToolSelector",
    "ToolsInput",
    "Workflow",
    "WorkflowChoice",
    "WorkflowKind",
    "choose_workflow",
    "rank_workflows",
    "select_workflow",
    "suggest_tools",
    "tool_specs",
]

logger = logging.getLogger(__name__)

DEFAULT_SUGGESTED_TOOLS = 10
"""How many tools :func:`suggest_tools` returns when ``k`` is not given."""

DEFAULT_WORKFLOW_THRESHOLD = 0.2
"""The score (0 to 1) below which :func:`select_workflow` says nothing fits. Set on the side of
choosing nothing: a wrong workflow puts wrong steps into the system prompt, a missed one only
leaves the model to find its own way. On hand-written requests, related ones score about 0.25
to 0.6 and unrelated ones 0 to 0.15; a single shared common word ("summarise") can reach 0.25."""

ToolsInput = Sequence[ToolSpec] | ToolProvider
"""What the ranking accepts: specs, or a registry (``ToolManager``) or a session's view of
registries (``ToolProxy``), whose visible tools are ranked."""


def tool_specs(tools: ToolsInput) -> list[ToolSpec]:
    """The specs of ``tools``, one per name (the first of duplicate names wins).

    Raises:
        TypeError: ``tools`` is neither a sequence of ``ToolSpec`` nor a tool provider.
    """
    return _unique(_listed(tools))


def _listed(tools: ToolsInput) -> Sequence[Any]:
    if isinstance(tools, list | tuple):
        return tools
    if isinstance(tools, ToolProvider):
        return tools.list_specs()
    if isinstance(tools, Sequence) and not isinstance(tools, str | bytes):
        return tools
    raise TypeError(
        f"tools must be a sequence of ToolSpec, a ToolManager or a ToolProxy, "
        f"not {type(tools).__name__}"
    )


def _unique(items: Sequence[Any]) -> list[ToolSpec]:
    seen: set[str] = set()
    unique: list[ToolSpec] = []
    for position, spec in enumerate(items):
        if not isinstance(spec, ToolSpec):
            raise TypeError(
                f"tools[{position}] is a {type(spec).__name__}, not a ToolSpec "
                "(pass manager.list_specs(), or the ToolManager or ToolProxy itself)"
            )
        if spec.name not in seen:
            seen.add(spec.name)
            unique.append(spec)
    return unique


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a whole number of tools, 0 or more; got {k!r}")


@runtime_checkable
class ToolSelector(Protocol):
    """Chooses the tools of one request: the seam for the agent loop's strategies."""

    async def select(self, query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        """At most ``k`` names of ``tools``, best first, never a name outside ``tools``."""
        ...


class OfflineToolSelector:
    """The offline ranking: BM25 fused with static embeddings, no model, no network.

    Args:
        embeddings: Fuse the WordLlama embedding ranking when the wheel is installed (False:
            BM25 alone).
    """

    def __init__(self, *, embeddings: bool = True) -> None:
        self.embeddings = embeddings
        self._cache = IndexCache()

    @property
    def index_builds(self) -> int:
        """How many indexes were built (a changed tool set builds a new one)."""
        return self._cache.builds

    def index(self, tools: ToolsInput) -> Ranking:
        """The index of ``tools`` (built on first use, then cached; a subset of an indexed set
        is a view of that index).

        Raises:
            TypeError: ``tools`` is not one of the accepted shapes.
        """
        items = _listed(tools)

        def prepare() -> tuple[Sequence[object], Hashable, Callable[[], RankingIndex]]:
            specs = _unique(items)
            return (
                specs,
                spec_content_key(specs, self.embeddings),
                lambda: RankingIndex([tool_document(s) for s in specs], embeddings=self.embeddings),
            )

        return self._cache.get(items, prepare)

    def rank(self, query: str, tools: ToolsInput, k: int = DEFAULT_SUGGESTED_TOOLS) -> list[str]:
        """The ``min(k, len(tools))`` best tool names, best first (see :func:`suggest_tools`)."""
        _check_k(k)
        query = bounded_query(query)
        items = _listed(tools)
        if k == 0 or not items:
            return []
        if not query.strip():
            return [s.name for s in _unique(items)[:k]]
        return self.index(items).rank(query, k)

    async def select(self, query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        """:meth:`rank` in a worker thread (building an index may take a moment)."""
        return await anyio.to_thread.run_sync(self.rank, query, tools, k)


_DEFAULT_SELECTOR = OfflineToolSelector()  # the process default: its cache is shared by callers


def suggest_tools(query: str, tools: ToolsInput, k: int = DEFAULT_SUGGESTED_TOOLS) -> list[str]:
    """The names of the ``k`` tools that best fit ``query``, best first, offline.

    Ranks by BM25 over the words of each tool's name (split on ``_``, ``.``, ``-`` and
    camelCase; an MCP tool's ``<server>__`` prefix counts as a word of its own), description,
    parameter names, parameter descriptions and enum values, fused (z-scored, added) with
    WordLlama static embeddings when ``wordllama`` is installed (BM25 alone otherwise, logged
    once). No model is called and nothing is downloaded. The index of a tool set is cached in
    the process, so only the first query of a new tool set pays for building it.

    Args:
        query: The request (usually the user's latest message). An empty query ranks nothing:
            the first ``k`` tools are returned in their given order.
        tools: ``ToolSpec`` values, a ``ToolManager``, or a ``ToolProxy`` (only the tools it
            lets the session see are ranked). Of duplicate names the first is kept.
        k: How many names to return, at most (0 or more).

    Returns:
        ``min(k, number of tools)`` distinct names, best first; tools no signal separates keep
        their given order.

    Raises:
        ValueError: ``k`` is negative or not an integer.
        TypeError: ``tools`` is not one of the accepted shapes.
    """
    return _DEFAULT_SELECTOR.rank(query, tools, k)


# -- workflows -----------------------------------------------------------------------------------


class Workflow(BaseModel):
    """A way to carry out a kind of request: its steps enter the system prompt when chosen.

    Attributes:
        name: The workflow's name (reported in ``workflow.selected``).
        description: When the workflow applies; what ranking matches a request against.
        steps: The steps, in order, as short instructions to the model.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    description: str
    steps: list[str] = Field(default_factory=list)


WorkflowKind = Literal["workflow", "skill"]


@dataclass(frozen=True, kw_only=True)
class WorkflowChoice:
    """A ranked workflow or skill.

    Attributes:
        name: The workflow's or the skill's name.
        kind: ``workflow`` or ``skill``.
        score: How well it fits the request, 0 (nothing in common) to 1.
    """

    name: str
    kind: WorkflowKind
    score: float

    def to_dict(self) -> dict[str, Any]:
        """The fields of the ``workflow.selected`` event: ``name``, ``kind``, ``score``."""
        return {"name": self.name, "kind": self.kind, "score": self.score}


Skills = Sequence[SkillSchema] | SkillSource | None
"""The skills that are workflow candidates: ``SkillSchema`` values, a ``SkillManager`` or a
``SkillProxy``; None for none."""


def _candidates(
    workflows: Sequence[Workflow], skills: Skills
) -> list[tuple[WorkflowKind, str, Document]]:
    found: list[tuple[WorkflowKind, str, Document]] = []
    for workflow in workflows:
        text = " ".join([workflow.name, workflow.description, *workflow.steps])
        semantic = ". ".join(
            [" ".join(split_words(workflow.name)), workflow.description, *workflow.steps]
        )
        found.append(("workflow", workflow.name, Document(key="", lexical=text, semantic=semantic)))
    listed = skills.list_skills() if isinstance(skills, SkillSource) else list(skills or [])
    for skill in listed:
        words = " ".join(split_words(skill.name))
        text = f"{words} {skill.description}"
        semantic = f"{words}. {skill.description}"
        found.append(("skill", skill.name, Document(key="", lexical=text, semantic=semantic)))
    return found


def rank_workflows(
    query: str, workflows: Sequence[Workflow], skills: Skills = None
) -> list[WorkflowChoice]:
    """Every workflow and skill, scored against ``query``, best first.

    The score is the mean of two parts, each 0 to 1: the share of the query's terms (stemmed,
    without stop words) that the candidate's name, description (and steps) contain, and the
    cosine similarity of their WordLlama embeddings (the lexical part alone when ``wordllama``
    is not installed). Ties keep the order workflows-then-skills.
    """
    candidates = _candidates(workflows, skills)
    query = bounded_query(query)
    query_terms = set(terms(query))
    if not candidates or not query_terms:
        return [WorkflowChoice(name=n, kind=kind, score=0.0) for kind, n, _ in candidates]
    coverage = [
        len(query_terms & set(terms(doc.lexical))) / len(query_terms) for _, _, doc in candidates
    ]
    embedder = embedding_model()
    if embedder is not None:
        vectors = embedder.embed([query, *(doc.semantic for _, _, doc in candidates)])
        cosine = [max(0.0, float(v)) for v in cosines(vectors[1:], vectors[0])]
        scores = [(c + s) / 2 for c, s in zip(coverage, cosine, strict=True)]
    else:
        scores = coverage
    choices = [
        WorkflowChoice(name=name, kind=kind, score=round(score, 4) if math.isfinite(score) else 0.0)
        for (kind, name, _), score in zip(candidates, scores, strict=True)
    ]
    order = sorted(range(len(choices)), key=lambda i: (-choices[i].score, i))
    return [choices[i] for i in order]


def choose_workflow(
    query: str,
    workflows: Sequence[Workflow],
    skills: Skills = None,
    *,
    threshold: float = DEFAULT_WORKFLOW_THRESHOLD,
) -> WorkflowChoice | None:
    """The best workflow or skill for ``query``, or None when its score is below ``threshold``
    (or there is nothing to choose from). See :func:`rank_workflows` for the score."""
    ranked = rank_workflows(query, workflows, skills)
    if not ranked or ranked[0].score < threshold:
        return None
    return ranked[0]


def select_workflow(
    query: str,
    workflows: Sequence[Workflow],
    skills: Skills = None,
    *,
    threshold: float = DEFAULT_WORKFLOW_THRESHOLD,
) -> str | None:
    """The name of the workflow or skill that fits ``query``, or None when none fits well
    enough (:func:`choose_workflow` gives its kind and score too).

    Args:
        query: The request.
        workflows: The session's workflows.
        skills: The session's skills (``SkillSchema`` values, a ``SkillManager`` or a
            ``SkillProxy``), candidates too; None for none.
        threshold: The least score (0 to 1) that counts as a fit.
    """
    choice = choose_workflow(query, workflows, skills, threshold=threshold)
    return None if choice is None else choice.name
