"""``skill_tool``: a session's skills exposed to the model as tools (docs/skills.md,
"The skill tools: SkillSession").

Progressive disclosure (Agent Skills specification, "Progressive disclosure"): the names and
descriptions go into the system prompt (:meth:`SkillSession.system_prompt`); the model calls
``load_skill`` to read a skill's instructions and file list, and ``read_skill_file`` to read one
of its files on demand. Each call is routed to the calling session's :class:`SkillSession`, built
by a factory from the call's :class:`~sagents.tool._context.SessionContext`, so the skills a model
can load and the ``allowed-tools`` it is held to are per session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sagents.core._permissions import ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.skill._session import SkillSession
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall
from sagents.tool.tool_manager import ToolManager

__all__ = ["LOAD_SKILL_SPEC", "READ_SKILL_FILE_SPEC", "SkillTools"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)

LOAD_SKILL_SPEC = ToolSpec(
    name="load_skill",
    description=(
        "Load one of the skills listed in the system prompt: returns its instructions and the "
        "files it ships. Call it when a task matches a skill's description, before doing the "
        "task. While a skill with allowed-tools is active, only those tools can be called."
    ),
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill's name."}},
        "required": ["name"],
        "additionalProperties": False,
    },
    annotations=_READ_ONLY,
    permission="read_only",
    source=ToolSource(kind="builtin"),
)

READ_SKILL_FILE_SPEC = ToolSpec(
    name="read_skill_file",
    description=(
        "Read one text file of a loaded skill (a reference or an asset listed by load_skill), "
        "by its path relative to the skill's directory."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name."},
            "path": {
                "type": "string",
                "description": "The file's path inside the skill, e.g. 'references/guide.md'.",
            },
        },
        "required": ["name", "path"],
        "additionalProperties": False,
    },
    annotations=_READ_ONLY,
    permission="read_only",
    source=ToolSource(kind="builtin"),
)


class SkillTools:
    """The ``load_skill`` and ``read_skill_file`` tools, one :class:`SkillSession` per session.

    Args:
        session_factory: Builds the :class:`SkillSession` of a session the first time one of
            its calls arrives (its skills, its sandbox projection, its ``ToolProxy`` for
            ``allowed-tools``). Sessions are keyed by ``SessionContext.session_id``.
    """

    def __init__(self, session_factory: Callable[[SessionContext], SkillSession]) -> None:
        self._factory = session_factory
        self._sessions: dict[str, SkillSession] = {}

    def session(self, context: SessionContext) -> SkillSession:
        """The calling session's :class:`SkillSession` (built on first use)."""
        found = self._sessions.get(context.session_id)
        if found is None:
            found = self._factory(context)
            self._sessions[context.session_id] = found
        return found

    def forget(self, session_id: str) -> None:
        """Drop a finished session's state (its active skills)."""
        self._sessions.pop(session_id, None)

    def register(self, manager: ToolManager, *, replace: bool = False) -> list[str]:
        """Register both tools on ``manager``.

        Returns:
            The registered names, ``["load_skill", "read_skill_file"]``.

        Raises:
            ToolNameConflictError: a tool of that name exists and ``replace`` is false.
        """
        manager.register_tool((LOAD_SKILL_SPEC, self._load_skill), replace=replace)
        manager.register_tool((READ_SKILL_FILE_SPEC, self._read_skill_file), replace=replace)
        return [LOAD_SKILL_SPEC.name, READ_SKILL_FILE_SPEC.name]

    async def _load_skill(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        text = await self.session(call.session_context).load_skill(str(arguments["name"]))
        return ToolResult.from_text(text)

    async def _read_skill_file(self, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
        session = self.session(call.session_context)
        await session.prepare(str(arguments["name"]))  # an MCP server's skill: fetched once
        text = session.read_skill_file(str(arguments["name"]), str(arguments["path"]))
        return ToolResult.from_text(text)
