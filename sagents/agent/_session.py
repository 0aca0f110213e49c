"""``AgentSession``: the mutable state the agent loop keeps per ``session_id``.

The frozen :class:`~sagents.tool._context.SessionContext` says who calls and under which mode;
it travels with every tool call. The :class:`AgentSession` is what the loop owns for that
session across turns and runs: the history, the ``ToolProxy`` it runs with
(:attr:`AgentSession.tool_manager`), the session's skills, and
:attr:`AgentSession.audit_status`. A tool reaches it through
:func:`current_agent_session` or by declaring a parameter
``Annotated[AgentSession, InjectedArg("agent_session")]``. See ``docs/agent.md``,
"Session state".
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sagents.agent._messages import Message, as_messages, as_openai_messages
from sagents.skill._proxy import SkillSource
from sagents.skill._sandbox_sync import SandboxFiles, SandboxSkillManager
from sagents.skill._session import SkillSession
from sagents.tool._approval import Approver, check_approver
from sagents.tool._context import SessionContext, running_context
from sagents.tool.questions import Questioner

if TYPE_CHECKING:
    from sagents.agent._compress import HistoryCompressor
from sagents.tool._tool_proxy import ToolProxy

__all__ = [
    "AGENT_SESSION_KEY",
    "AgentSession",
    "AuditStatus",
    "SandboxRelay",
    "current_agent_session",
    "session_of",
]

AGENT_SESSION_KEY = "agent_session"
"""The ``SessionContext.trusted`` key under which tools find the :class:`AgentSession`."""


class AuditStatus(dict[str, Any]):
    """A dict-like record of the session's tool bookkeeping.

    Always holds ``suggested_tools`` (the tool names tool suggestion picked and
    ``tool_expand_tools`` added, in order; empty by default) and ``tools_expanded`` (whether
    ``tool_expand_tools`` added any); ``selected_workflow`` with ``workflow_select``; other
    keys may be added by tools (docs/agent.md, "Tool suggestion").
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setdefault("suggested_tools", [])
        self.setdefault("tools_expanded", False)

    @property
    def suggested_tools(self) -> list[str]:
        """Tool names suggested for the session."""
        value: list[str] = self["suggested_tools"]
        return value

    @property
    def tools_expanded(self) -> bool:
        """Whether the session's tool list was expanded."""
        return bool(self["tools_expanded"])

    def snapshot(self) -> dict[str, Any]:
        """A copy for an event: its lists and dicts copied too, so that later changes of the
        session (the next expansion) do not show in an event already sent."""
        return {
            key: list(value)
            if isinstance(value, list)
            else dict(value)
            if isinstance(value, dict)
            else value
            for key, value in self.items()
        }


class SandboxRelay:
    """The session's sandbox files as the skills layer holds them: each run opens its own
    sandbox and points the relay at it, so a skill loaded in a later run is projected into that
    run's sandbox."""

    def __init__(self, target: SandboxFiles) -> None:
        self.target = target

    async def read_file(self, path: str) -> bytes:
        """Read a whole file of the current sandbox."""
        return await self.target.read_file(path)

    async def write_file(self, path: str, data: bytes) -> object:
        """Write a whole file into the current sandbox."""
        return await self.target.write_file(path, data)

    async def exists(self, path: str) -> bool:
        """Whether ``path`` exists in the current sandbox."""
        return await self.target.exists(path)

    async def mkdir(self, path: str) -> object:
        """Create a directory in the current sandbox."""
        return await self.target.mkdir(path)


class AgentSession:
    """One session's state, owned by the agent loop.

    Args:
        context: The session's frozen context (its ``session_id`` keys this state).
        tool_manager: The ``ToolProxy`` the session's calls go through.
        skill_source: The session's skills (a ``SkillProxy`` or ``SkillManager``), if any.
        approver: The approver of the session's calls, if any.

    Raises:
        TypeError: ``approver`` is no :class:`~sagents.tool.Approver` (no ``approve`` method).
    """

    def __init__(
        self,
        context: SessionContext,
        tool_manager: ToolProxy,
        *,
        skill_source: SkillSource | None = None,
        approver: Approver | None = None,
    ) -> None:
        self.context = context
        self.tool_manager = tool_manager
        self.skill_source = skill_source
        self.skills: SkillSession | None = None
        """The skill tools' state (active skills), built by :meth:`init_more`."""
        check_approver(approver, "AgentSession")
        self.approver = approver
        self.run_approver: Approver | None = None
        """While a run is in progress, the approver that asks through it (so that its
        ``approval.request``/``approval.result`` events show); None otherwise."""
        self.questioner: Questioner | None = None
        """The application's questioner (``run_stream(questioner=...)``), if any."""
        self.run_questioner: Questioner | None = None
        """While a run is in progress, the questioner that asks through it (its
        ``questionnaire.request`` events, and :attr:`questioner`); None otherwise."""
        self.run_compressor: HistoryCompressor | None = None
        """While a run is in progress, what compresses its history; None otherwise."""
        self.history: list[Message] = []
        """The history: the last run's input messages, then every message it added (neutral
        :class:`~sagents.agent.Message` values: reasoning signatures are kept between turns)."""
        self.audit_status = AuditStatus()
        self.offered_tools: list[str] = []
        """With tool suggestion, the tools offered so far, in the order first offered: each
        turn's list keeps it (append-only, so that provider prompt caches survive)."""
        self.granted: set[str] = set()
        """Tools allowed for the rest of the session by a resumed run's decision or a stored
        session (besides the ``ToolProxy``'s own grants)."""
        self.offer: tuple[tuple[object, ...], list[dict[str, Any]], set[str]] | None = None
        """The tools offered to the session's last model call (without tool suggestion), the
        session's allowed tools, and what both depend on: offered again while that stays the
        same, in later runs of the session too."""
        self.restored_skills: list[str] = []
        """Skills a stored session or paused run had loaded, loaded again by the next run."""
        self.skill_sandbox: SandboxSkillManager | None = None
        """Where the skills were projected by :meth:`init_more`, if anywhere."""
        self._initialized = False
        self._relay: SandboxRelay | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """:attr:`history` in the OpenAI Chat Completions form (a new list each time: change
        :attr:`history` to change the history)."""
        return as_openai_messages(self.history)

    @messages.setter
    def messages(self, value: Sequence[Message | Mapping[str, Any]]) -> None:
        self.history = as_messages(value)

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.context.session_id

    @property
    def initialized(self) -> bool:
        """Whether :meth:`init_more` has run."""
        return self._initialized

    async def init_more(self, *, sandbox: SandboxFiles | None = None) -> list[str]:
        """Run once before the session's first turn: set up its skills and project them into
        its sandbox (the skills layer's ``SandboxSkillManager``).

        Later calls only point the projection at ``sandbox`` (the run's own), so that a skill
        loaded later lands there. Without skills or a sandbox there is nothing to project.

        Args:
            sandbox: The session's sandbox file API (the run_script sandbox), if it has one.

        Returns:
            The names of the skills projected (empty on later calls).
        """
        if self._initialized:
            if sandbox is not None and self._relay is not None:
                self._relay.target = sandbox  # this run's sandbox
            return []
        self._initialized = True
        source = self.skill_source
        if source is None:
            return []
        if sandbox is not None:
            self._relay = SandboxRelay(sandbox)
            self.skill_sandbox = SandboxSkillManager(source, self._relay)
        self.skills = SkillSession(source, sandbox=self.skill_sandbox, tools=self.tool_manager)
        if self.skill_sandbox is None:
            return []
        projected = []
        for skill in source.list_skills():
            await self.skill_sandbox.project(skill.name)
            projected.append(skill.name)
        return projected

    async def compress_history(self, *, focus: str | None = None) -> Mapping[str, Any]:
        """Summarise the older turns now (the ``compress_history`` tool; docs/agent.md,
        "History compression"); the report (``compressed``, counts, ``record``, ``error``)."""
        if self.run_compressor is None:
            return {"compressed": False, "error": "no run of this session is in progress"}
        return await self.run_compressor.compress(reason="requested", focus=focus)

    @contextmanager
    def running(
        self,
        *,
        approver: Approver | None,
        compressor: HistoryCompressor | None,
        questioner: Questioner | None = None,
    ) -> Iterator[None]:
        """Lend the session to one run of the agent loop for the block.

        Inside it, :attr:`run_approver`, :attr:`run_compressor` and :attr:`run_questioner` are
        the run's (and the run's tool calls, whose context carries the session, find it with
        :func:`current_agent_session`); leaving gives them back, so that nothing of a finished
        run stays reachable from the session.

        Args:
            approver: The approver that asks through the run (its approval events), or None.
            compressor: What compresses the run's history.
            questioner: The questioner that asks through the run, carried by the context of
                each of its tool calls (:meth:`context_for_tools`), or None.
        """
        self.run_approver, self.run_compressor = approver, compressor
        self.run_questioner = questioner
        try:
            yield
        finally:
            self.run_approver = self.run_compressor = self.run_questioner = None

    def context_for_tools(
        self, *, questioner: Questioner | None = None, granted: Collection[str] = ()
    ) -> SessionContext:
        """The context passed to tools: the session's, with this state under
        :data:`AGENT_SESSION_KEY` in ``trusted``, the questioner its ``questionnaire``
        calls ask (``questioner``, else the run's :attr:`run_questioner`) and the tools the
        session allowed for the rest of the session (``granted``)."""
        trusted = {**self.context.trusted, AGENT_SESSION_KEY: self}
        return SessionContext(
            session_id=self.context.session_id,
            user_id=self.context.user_id,
            workspace=self.context.workspace,
            permission_mode=self.context.permission_mode,
            agent=self.context.agent,
            trusted=trusted,
            questioner=questioner if questioner is not None else self.run_questioner,
            granted=frozenset(granted),
        )


def current_agent_session() -> AgentSession | None:
    """The :class:`AgentSession` whose run is executing this code (a tool's call), or None.

    The session travels with each of its run's tool calls, in the call's context
    (``SessionContext.trusted[AGENT_SESSION_KEY]``, :meth:`AgentSession.context_for_tools`);
    this reads it from the context of the tool call running now. A tool that has its call
    reads it there, or declares ``Annotated[AgentSession, InjectedArg("agent_session")]``.
    """
    context = running_context()
    return None if context is None else session_of(context)


def session_of(context: SessionContext) -> AgentSession | None:
    """The :class:`AgentSession` a tool call's context carries (its run's), or None."""
    session = context.trusted.get(AGENT_SESSION_KEY)
    return session if isinstance(session, AgentSession) else None
