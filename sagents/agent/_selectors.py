"""Tool selectors that ask the provider: one model call, or its ``/embeddings`` endpoint
(docs/tool-suggestion.md).

Both implement :class:`~sagents.agent._suggest.ToolSelector` and fall back to the offline
ranking (:class:`~sagents.agent._suggest.OfflineToolSelector`) when the provider fails or
answers nothing usable, so a run never loses its tools to a selector's error.

- :class:`LLMToolSelector`: one cheap Chat Completions call that picks up to ``k`` names from
  the tools' names and one-line summaries (as LangChain's ``LLMToolSelectorMiddleware`` does).
  Unknown names in the answer are dropped; an answer that is not a JSON list of names falls
  back to the offline ranking.
- :class:`EmbeddingsToolSelector`: the provider's OpenAI-compatible ``/embeddings`` endpoint
  (OpenAI API reference, "Embeddings"), tool vectors computed once per tool set, fused with
  BM25 the way the offline ranking fuses WordLlama.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import openai
from openai import AsyncOpenAI

from sagents.agent._chat_model import ChatModel, ModelRequest, complete
from sagents.agent._messages import as_messages
from sagents.agent._model import OpenAIChatModel
from sagents.agent._ranking import (
    RankingIndex,
    cosines,
    spec_content_key,
    standardised,
    tool_document,
)
from sagents.agent._suggest import (
    DEFAULT_WORKFLOW_THRESHOLD,
    OfflineToolSelector,
    Skills,
    ToolSelector,
    Workflow,
    WorkflowChoice,
    choose_workflow,
    rank_workflows,
)
from sagents.core._spec import ToolSpec
from sagents.errors import ModelError
from sagents.skill._proxy import SkillSource

__all__ = [
    "DEFAULT_LLM_CANDIDATES",
    "LLM_SELECTOR_PROMPT",
    "LLM_WORKFLOW_PROMPT",
    "EmbeddingsToolSelector",
    "LLMToolSelector",
    "choose_workflow_with_model",
    "parse_tool_names",
]

logger = logging.getLogger("sagents.agent._suggest")

DEFAULT_LLM_CANDIDATES = 100
"""How many tools (the offline ranking's best) the model chooses among, at most: a prompt that
lists 2,000 tools would cost what suggestion saves."""

SUMMARY_CHARS = 200
"""Characters of a tool's summary line shown to the model."""

EMBEDDING_BATCH = 256
"""Texts per ``/embeddings`` request when the tool vectors are computed."""

CACHE_ENTRIES = 16
"""Tool sets whose vectors one :class:`EmbeddingsToolSelector` keeps."""

LLM_SELECTOR_PROMPT = (
    "You choose the tools an assistant needs for a user's request. Reply with a JSON array of "
    "at most {k} tool names from the list, most useful first, and nothing else. Use the names "
    'exactly as listed. Reply [] if no tool is needed. Example: ["search_web", "read_file"]'
)
"""The selector's system prompt (``{k}`` is the number of names asked for)."""

LLM_WORKFLOW_PROMPT = (
    "You choose how an assistant should handle a user's request: one of the listed workflows "
    'or skills, or none. Reply with JSON only: {"name": "<a listed name>"}, or {"name": null} '
    "when none of them clearly fits."
)
"""The system prompt of :func:`choose_workflow_with_model`."""


def _json_or_none(text: str) -> Any:
    """``text`` parsed as JSON, or None when it is not JSON or nests too deeply to parse."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _outermost(text: str, opening: str, closing: str) -> str | None:
    """From the first ``opening`` to the last ``closing`` after it (no regex over model text)."""
    start, end = text.find(opening), text.rfind(closing)
    return text[start : end + 1] if 0 <= start < end else None


def parse_tool_names(text: str) -> list[str] | None:
    """The names of a selector answer: the first JSON array of strings in ``text`` (a code
    fence or words around it are ignored), or ``{"tools": [...]}``. None when there is none."""
    stripped = text.strip()
    candidates = [_json_or_none(stripped)]
    if candidates[0] is None:
        inner = _outermost(stripped, "[", "]")
        if inner is not None:
            candidates.append(_json_or_none(inner))
    for value in candidates:
        if isinstance(value, dict):
            value = value.get("tools")
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [v.strip() for v in value]
    return None


def _known_names(names: Sequence[str], tools: Sequence[ToolSpec], k: int) -> list[str]:
    known = {s.name for s in tools}
    chosen: list[str] = []
    for name in names:
        if name in known and name not in chosen:
            chosen.append(name)
    dropped = [n for n in names if n not in known]
    if dropped:
        logger.info("tool suggestion: the selector named unknown tools %r (dropped)", dropped)
    return chosen[:k]


async def _text_of(model: ChatModel, messages: list[dict[str, Any]], purpose: str) -> str:
    request = ModelRequest(messages=tuple(as_messages(messages)))
    return (await complete(model, request, purpose=purpose)).message.text


class LLMToolSelector:
    """Picks tools with one model call; the offline ranking when that fails.

    Args:
        model: The chat model to ask (usually the agent's own, or a cheaper one of the same
            provider).
        fallback: The selector used when the call fails or its answer is unusable (default:
            the offline ranking).
        max_candidates: How many tools the model chooses among: the fallback's best
            ``max_candidates`` for the request when there are more.
        prompt: The system prompt; ``{k}`` is replaced by the number of names asked for.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        fallback: ToolSelector | None = None,
        max_candidates: int = DEFAULT_LLM_CANDIDATES,
        prompt: str = LLM_SELECTOR_PROMPT,
    ) -> None:
        self.model = model
        self.fallback: ToolSelector = fallback or OfflineToolSelector()
        self.max_candidates = max_candidates
        self.prompt = prompt

    async def select(self, query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        """At most ``k`` names of ``tools`` the model chose, in its order (see the class)."""
        if k <= 0 or not tools:
            return []
        candidates = list(tools)
        if len(candidates) > self.max_candidates:
            keep = set(await self.fallback.select(query, candidates, self.max_candidates))
            candidates = [s for s in candidates if s.name in keep]
        listing = "\n".join(f"- {s.name}: {s.summary[:SUMMARY_CHARS]}" for s in candidates)
        messages = [
            {"role": "system", "content": self.prompt.replace("{k}", str(k))},
            {"role": "user", "content": f"Request:\n{query}\n\nTools:\n{listing}"},
        ]
        try:
            text = await _text_of(self.model, messages, "tool_selection")
        except ModelError as error:
            logger.warning("tool suggestion: the selector call failed (%s); ranking offline", error)
            return await self.fallback.select(query, tools, k)
        names = parse_tool_names(text)
        if names is None:
            logger.warning(
                "tool suggestion: the selector's answer is not a JSON list of names (%r); "
                "ranking offline",
                text[:200],
            )
            return await self.fallback.select(query, tools, k)
        chosen = _known_names(names, candidates, k)
        if names and not chosen:
            return await self.fallback.select(query, tools, k)
        return chosen


class EmbeddingsToolSelector:
    """Ranks tools by the provider's ``/embeddings`` vectors, fused with BM25.

    Args:
        client: The provider: an ``OpenAIChatModel`` (its client is used) or an
            ``AsyncOpenAI``.
        model: The embedding model's name (``text-embedding-3-small``, a local server's
            model).
        lexical: Fuse BM25 scores with the embedding scores (False: embeddings alone).
        fallback: The selector used when the endpoint fails (default: the offline ranking).
    """

    def __init__(
        self,
        client: OpenAIChatModel | AsyncOpenAI,
        model: str,
        *,
        lexical: bool = True,
        fallback: ToolSelector | None = None,
    ) -> None:
        self.client = client.client if isinstance(client, OpenAIChatModel) else client
        self.model = model
        self.lexical = lexical
        self.fallback: ToolSelector = fallback or OfflineToolSelector()
        self._cache: OrderedDict[Hashable, tuple[Any, RankingIndex]] = OrderedDict()

    async def select(self, query: str, tools: Sequence[ToolSpec], k: int) -> list[str]:
        """At most ``k`` names of ``tools``, best first; the fallback's if the endpoint fails."""
        import numpy as np

        if k <= 0 or not tools:
            return []
        if not query.strip():
            return [s.name for s in tools[:k]]
        try:
            vectors, index = await self._index(tools)
            (query_vector,) = await self._embed([query])
        except (openai.OpenAIError, ValueError) as error:
            logger.warning(
                "tool suggestion: the embeddings endpoint failed (%s); ranking offline", error
            )
            return await self.fallback.select(query, tools, k)
        fused = standardised(cosines(vectors, query_vector))
        if self.lexical:
            fused = fused + np.asarray(index.scores(query))
        order = sorted(range(len(tools)), key=lambda i: (-float(fused[i]), i))
        return [tools[i].name for i in order[:k]]

    async def _index(self, tools: Sequence[ToolSpec]) -> tuple[Any, RankingIndex]:
        key = spec_content_key(tools, False)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        documents = [tool_document(s) for s in tools]
        vectors = await self._embed([d.semantic for d in documents])
        entry = (vectors, RankingIndex(documents, embeddings=False))
        self._cache[key] = entry
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return entry

    async def _embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), EMBEDDING_BATCH):
            batch = list(texts[start : start + EMBEDDING_BATCH])
            answer = await self.client.embeddings.create(model=self.model, input=batch)
            data = sorted(answer.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise ValueError(
                    f"the endpoint returned {len(data)} vectors for {len(batch)} texts"
                )
            rows.extend(list(item.embedding) for item in data)
        matrix = np.asarray(rows, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return matrix / norms


async def choose_workflow_with_model(
    model: ChatModel,
    query: str,
    workflows: Sequence[Workflow],
    skills: Skills = None,
    *,
    threshold: float = DEFAULT_WORKFLOW_THRESHOLD,
) -> WorkflowChoice | None:
    """The workflow or skill a model picks for ``query`` (one call), or None when it picks none.

    The choice's ``score`` is the offline score of that candidate (see
    :func:`~sagents.agent._suggest.rank_workflows`), so events stay comparable. When the call
    fails or the answer names nothing listed, the offline :func:`choose_workflow` decides
    (with ``threshold``).
    """
    ranked = rank_workflows(query, workflows, skills)
    if not ranked or not query.strip():
        return None
    by_name = {c.name: c for c in reversed(ranked)}  # of equal names, the best-ranked wins
    descriptions = {w.name: w.description for w in workflows}
    listed = skills.list_skills() if isinstance(skills, SkillSource) else list(skills or [])
    for skill in listed:
        descriptions.setdefault(skill.name, skill.description)
    listing = "\n".join(
        f"- {c.name} ({c.kind}): {descriptions.get(c.name, '')[:SUMMARY_CHARS]}" for c in ranked
    )
    messages = [
        {"role": "system", "content": LLM_WORKFLOW_PROMPT},
        {"role": "user", "content": f"Request:\n{query}\n\nWorkflows and skills:\n{listing}"},
    ]
    try:
        text = await _text_of(model, messages, "workflow_selection")
    except ModelError as error:
        logger.warning("workflow_select: the model call failed (%s); choosing offline", error)
        return choose_workflow(query, workflows, skills, threshold=threshold)
    inner = _outermost(text, "{", "}")
    answer = None if inner is None else _json_or_none(inner)
    if isinstance(answer, dict) and "name" in answer:
        name = answer["name"]
        if name is None:
            return None
        if isinstance(name, str) and name.strip() in by_name:
            return by_name[name.strip()]
    logger.warning(
        "workflow_select: the model's answer %r names nothing listed; choosing offline", text[:200]
    )
    return choose_workflow(query, workflows, skills, threshold=threshold)
