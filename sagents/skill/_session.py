"""``SkillSession``: the model-facing skill tools of one session, as plain methods.

This is the logic behind ``skill_tool`` (docs/skills.md): the host wraps
:meth:`SkillSession.load_skill` and :meth:`SkillSession.read_skill_file` as tools (with ``@tool``
once the tool core lands) and puts :meth:`SkillSession.system_prompt` into the system prompt.
Loading a skill projects it into the sandbox (when a ``SandboxSkillManager`` is given) and holds
the session to its ``allowed-tools`` (when a ``ToolProxy`` is given).
"""

from __future__ import annotations

from collections.abc import Iterable

from sagents.errors import SkillError
from sagents.skill._activation import ToolRestrictor, activate_skill
from sagents.skill._disclosure import (
    DEFAULT_MAX_RESOURCE_BYTES,
    LoadedSkill,
    load_skill,
    read_skill_resource,
    render_skills_prompt,
)
from sagents.skill._proxy import SkillSource, prepare_skill
from sagents.skill._sandbox_sync import SandboxSkillManager

__all__ = ["DEFAULT_SKILL_TOOL_NAMES", "SkillSession"]

DEFAULT_SKILL_TOOL_NAMES = (
    "load_skill",
    "read_skill_file",
)  # kept callable while a skill is active


class SkillSession:
    """One session's skills, as the operations a model calls.

    Args:
        skills: The session's ``SkillProxy`` (or a ``SkillManager``).
        sandbox: Projects a loaded skill into the sandbox; ``None`` leaves files on the host.
        tools: The session's ``ToolProxy`` (anything with ``restrict``), to enforce
            ``allowed-tools``; ``None`` enforces nothing.
        always_allowed: Tools that stay callable while a skill is active (the skill tools).
    """

    def __init__(
        self,
        skills: SkillSource,
        *,
        sandbox: SandboxSkillManager | None = None,
        tools: ToolRestrictor | None = None,
        always_allowed: Iterable[str] = DEFAULT_SKILL_TOOL_NAMES,
    ) -> None:
        self._skills = skills
        self._sandbox = sandbox
        self._tools = tools
        self._always_allowed = tuple(always_allowed)
        self._active: list[str] = []

    @property
    def active_skills(self) -> tuple[str, ...]:
        """The skills loaded so far in this session, in load order."""
        return tuple(self._active)

    def system_prompt(self, *, max_tokens: int) -> str:
        """The skills fragment of the system prompt (see ``render_skills_prompt``)."""
        return render_skills_prompt(self._skills, max_tokens=max_tokens)

    async def load(self, name: str) -> LoadedSkill:
        """Load skill ``name``: project it, activate its ``allowed-tools``, return it.

        Raises:
            SkillNotFoundError: The session has no such skill (the hint lists the names).
            SkillError: The skill's files could not be fetched (an MCP server's skill).
        """
        await self.prepare(name)
        if self._sandbox is not None:
            loaded = await self._sandbox.load(name)
        else:
            loaded = load_skill(self._skills, name)
        skill = self._skills.get_skill(name)
        if self._tools is not None and skill is not None:
            activate_skill(self._tools, skill, always_allowed=self._always_allowed)
        if name not in self._active:
            self._active.append(name)
        return loaded

    async def prepare(self, name: str) -> None:
        """Fetch skill ``name``'s files when they arrive on first use (an MCP server's
        skill); nothing for a local one. :meth:`load` calls it; call it before
        :meth:`read_skill_file` when the source may be remote.

        Raises:
            SkillError: The skill's files could not be fetched.
        """
        await prepare_skill(self._skills, name)

    async def load_skill(self, name: str) -> str:
        """The ``load_skill`` tool: the skill's instructions and files, as text for the model.

        Raises:
            SkillNotFoundError: The session has no such skill.
        """
        return (await self.load(name)).to_text()

    def read_skill_file(
        self, name: str, path: str, *, max_bytes: int = DEFAULT_MAX_RESOURCE_BYTES
    ) -> str:
        """The ``read_skill_file`` tool: one text file of a skill, read on demand.

        Raises:
            SkillNotFoundError: The session has no such skill.
            PathNotAllowedError: ``path`` leaves the skill's directory.
            SkillResourceNotFoundError: The skill has no such file.
            SkillError: The file is larger than ``max_bytes`` or is not UTF-8 text.
        """
        data = read_skill_resource(self._skills, name, path, max_bytes=max_bytes)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SkillError(
                f"{path!r} of skill {name!r} is not UTF-8 text",
                hint="process binary files with a script in the sandbox",
                details={"skill": name, "path": path},
            ) from error
