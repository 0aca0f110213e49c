"""The one approval protocol: what a call waiting for the user looks like, and who answers it.

Every caller that needs a human's yes or no uses these types: the library's
:class:`~sagents.tool.tool_proxy.ToolProxy` when a session's mode asks, the agent loop
(``sagents.agent``), and the command line. An :class:`ApprovalRequest` is a frozen value that
shows exactly what will run (the tool names and their permission classes, the arguments or the
script as literal text, the session); an :class:`Approver` answers it with one of three words:

- ``allow_once``: run this call;
- ``allow_session``: run it, and do not ask again for these tools in this session;
- ``deny``: do not run it.

A request says which answers it offers (:attr:`ApprovalRequest.offered`): a destructive tool and
a run_script approval offer only ``allow_once`` and ``deny``. An answer outside the offer counts
as ``deny`` (:func:`settle_answer`). See ``docs/tools.md``, "Permission modes and approvals".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, get_args, runtime_checkable

from sagents.core.permissions import PermissionClass

__all__ = [
    "APPROVAL_ANSWERS",
    "AllowAllApprover",
    "ApprovalAnswer",
    "ApprovalKind",
    "ApprovalRequest",
    "Approver",
    "DenyAllApprover",
    "settle_answer",
]

ApprovalAnswer = Literal["allow_once", "allow_session", "deny"]
"""The three answers to an approval request."""

ApprovalKind = Literal["tool_call", "script"]
"""What waits: one tool call, or one run_script run (its listed write tools)."""

APPROVAL_ANSWERS: Final[tuple[ApprovalAnswer, ...]] = get_args(ApprovalAnswer)
"""Every :data:`ApprovalAnswer`, in the order a prompt shows them."""

_ONCE_OR_DENY: Final[tuple[ApprovalAnswer, ...]] = ("allow_once", "deny")


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One call (or one script) waiting for the user's answer.

    Build it with :meth:`for_tool_call` or :meth:`for_script`.

    Attributes:
        kind: ``tool_call`` or ``script``.
        tools: The tools it concerns: the one tool of a call, or a script's write tools.
        permissions: The permission class of each tool in :attr:`tools`.
        arguments: A tool call's arguments, as the model sent them (None for a script).
        script: A script's source, whole (None for a tool call).
        description: A script's ``description``, or an empty string.
        session_id: The session asking.
        tool_call_id: The model's id of the call, when there is one.
        offered: The answers the user may give, in prompt order.
    """

    kind: ApprovalKind
    tools: tuple[str, ...]
    permissions: Mapping[str, PermissionClass] = field(default_factory=dict)
    arguments: Mapping[str, Any] | None = None
    script: str | None = None
    description: str = ""
    session_id: str = ""
    tool_call_id: str | None = None
    offered: tuple[ApprovalAnswer, ...] = APPROVAL_ANSWERS

    @classmethod
    def for_tool_call(
        cls,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        permission: PermissionClass,
        session_id: str,
        tool_call_id: str | None = None,
    ) -> ApprovalRequest:
        """The request for one tool call; a destructive tool is never offered ``allow_session``.

        Args:
            tool: The tool's registered name.
            arguments: The call's arguments.
            permission: The tool's permission class.
            session_id: The calling session.
            tool_call_id: The model's id of the call, if any.
        """
        offered = _ONCE_OR_DENY if permission == "destructive" else APPROVAL_ANSWERS
        return cls(
            kind="tool_call",
            tools=(tool,),
            permissions={tool: permission},
            arguments=dict(arguments),
            session_id=session_id,
            tool_call_id=tool_call_id,
            offered=offered,
        )

    @classmethod
    def for_script(
        cls,
        tools: tuple[str, ...],
        script: str,
        *,
        description: str = "",
        session_id: str = "",
        tool_call_id: str | None = None,
    ) -> ApprovalRequest:
        """The one request before a run_script run: offers only ``allow_once`` and ``deny``.

        Args:
            tools: The listed write tools the script may call.
            script: The script's source.
            description: run_script's ``description`` argument.
            session_id: The calling session.
            tool_call_id: The model's id of the run_script call, if any.
        """
        return cls(
            kind="script",
            tools=tuple(tools),
            permissions=dict.fromkeys(tools, "write"),
            script=script,
            description=description,
            session_id=session_id,
            tool_call_id=tool_call_id,
            offered=_ONCE_OR_DENY,
        )

    @property
    def rememberable(self) -> bool:
        """Whether ``allow_session`` is offered."""
        return "allow_session" in self.offered

    def shown_text(self) -> str:
        """What a prompt shows, literally and whole: the arguments as indented JSON, or the
        script's source (never cut: the user must be able to read what they approve)."""
        if self.script is not None:
            return self.script
        return json.dumps(dict(self.arguments or {}), ensure_ascii=False, indent=2, default=str)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the ``approval.request`` event of the agent loop carries it)."""
        return {
            "kind": self.kind,
            "tools": list(self.tools),
            "permissions": dict(self.permissions),
            "arguments": None if self.arguments is None else dict(self.arguments),
            "script": self.script,
            "description": self.description,
            "session_id": self.session_id,
            "tool_call_id": self.tool_call_id,
            "offered": list(self.offered),
        }


@runtime_checkable
class Approver(Protocol):
    """Answers approval requests: a terminal prompt, an MCP elicitation, allow-all, deny-all."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Return ``allow_once``, ``allow_session`` or ``deny``; never raise for a refusal."""
        ...


@dataclass(frozen=True)
class AllowAllApprover:
    """Allows every request once (trusted callers, CI that must write)."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Always ``allow_once``."""
        return "allow_once"


@dataclass(frozen=True)
class DenyAllApprover:
    """Denies every request (non-interactive callers that must not write)."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Always ``deny``."""
        return "deny"


def settle_answer(request: ApprovalRequest, answer: object) -> ApprovalAnswer:
    """The answer that counts: ``answer`` when the request offered it, else ``deny``."""
    for offered in request.offered:
        if answer == offered:
            return offered
    return "deny"
