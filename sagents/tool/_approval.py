"""The one approval protocol: what a call waiting for the user looks like, and who answers it.

Every caller that needs a human's yes or no uses these types: the library's
:class:`~sagents.tool._tool_proxy.ToolProxy` when a session's mode asks, the agent loop
(``sagents.agent``), and the command line. An :class:`ApprovalRequest` is a frozen value that
shows exactly what will run (the tool names and their permission classes, the arguments or the
script as literal text, the session); an :class:`Approver` answers it with one of three words:

- ``allow_once``: run this call;
- ``allow_session``: run it, and do not ask again for these tools in this session;
- ``deny``: do not run it.

An approver may also say why it denied (:class:`ExplainsDenial`, read by
:func:`denial_reason`): whether a person was asked at all, or nobody could be.

A request says which answers it offers (:attr:`ApprovalRequest.offered`): a destructive tool and
a run_script approval offer only ``allow_once`` and ``deny``. An answer outside the offer counts
as ``deny`` (:func:`settle_answer`). See ``docs/tools.md``, "Permission modes and approvals".

A call is decided once (docs/architecture.md, "The decision"): the one policy step in front of
it (``ToolProxy`` in the library and the agent loop, the gateway for an MCP client, run_script's
pre-run check for a script) makes a :class:`Decision`, which travels with the call in its
:class:`~sagents.tool._context.SessionContext` (``decision``); whatever runs the call further
down reads it and never asks or decides again.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, get_args, runtime_checkable

from sagents.core._literal import printable, quoted_line
from sagents.core._permissions import PermissionClass, PermissionMode
from sagents.core._spec import ToolSpec
from sagents.errors import NotAllowedError

__all__ = [
    "APPROVAL_ANSWERS",
    "MAX_DESCRIPTION_CHARS",
    "AllowAllApprover",
    "ApprovalAnswer",
    "ApprovalKind",
    "ApprovalRequest",
    "ApprovalView",
    "Approver",
    "Decision",
    "DecisionKind",
    "DenyAllApprover",
    "ExplainsDenial",
    "approval_needed",
    "check_approver",
    "denial_reason",
    "settle_answer",
]

ApprovalAnswer = Literal["allow_once", "allow_session", "deny"]
"""The three answers to an approval request."""

ApprovalKind = Literal["tool_call", "script"]
"""What waits: one tool call, or one run_script run (its listed write tools)."""

DecisionKind = Literal["allowed", "denied", "approved_once", "approved_session"]
"""What the policy step decided for a call: it runs without asking (``allowed``), it does not run
(``denied``), the user approved it (``approved_once``), or it runs on the session's grant
(``approved_session``: "allow for this session", now or earlier)."""

APPROVAL_ANSWERS: Final[tuple[ApprovalAnswer, ...]] = get_args(ApprovalAnswer)
"""Every :data:`ApprovalAnswer`, in the order a prompt shows them."""

_ONCE_OR_DENY: Final[tuple[ApprovalAnswer, ...]] = ("allow_once", "deny")

MAX_DESCRIPTION_CHARS: Final = 200
"""The most characters of run_script's ``description`` (its input schema's ``maxLength``): it
is shown on one line of every approval."""


@dataclass(frozen=True, kw_only=True)
class ApprovalView:
    """What every channel shows of a request (a terminal prompt, an MCP elicitation, the web
    console), as separate fields that the model's text cannot restructure.

    Attributes:
        heading: One line in sagents' own words: what waits, its tools and their classes.
        description: A script's ``description`` as one literal line in double quotes (quotes,
            backslashes, newlines and control characters shown as escapes), or "".
        body_label: ``Script`` or ``Arguments``.
        body: :meth:`ApprovalRequest.shown_text`: the script or the arguments, literal and
            whole (control characters escaped; a script keeps its lines).
    """

    heading: str
    description: str
    body_label: str
    body: str

    def text(self) -> str:
        """The plain-text rendering (an elicitation message): the heading, the description
        line, then the body after a label that gives its size, so that nothing is hidden."""
        lines = [self.heading]
        if self.description:
            lines.append(f"Description (the model's words, one line): {self.description}")
        count = self.body.count("\n") + 1
        size = f"{count} line{'' if count == 1 else 's'}, {len(self.body)} characters"
        lines.append(f"{self.body_label} ({size}, shown whole):")
        lines.append(self.body)
        return "\n".join(lines)


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

    def view(self) -> ApprovalView:
        """The one structured rendering every channel shows (never cut: a channel that cannot
        show all of it refuses to ask, and says where it can be approved)."""
        tools = ", ".join(f"{name} ({self.permissions.get(name, 'write')})" for name in self.tools)
        if self.kind == "script":
            heading = printable(
                f"run_script wants to call the write tools {tools}. Allow this script?",
                newlines=False,
            )
            description = quoted_line(self.description) if self.description else ""
            return ApprovalView(
                heading=heading,
                description=description,
                body_label="Script",
                body=printable(self.shown_text()),
            )
        tool = self.tools[0]
        return ApprovalView(
            heading=printable(
                f"Allow the {self.permissions.get(tool, 'write')} tool {tool!r} to run with "
                "these arguments?",
                newlines=False,
            ),
            description="",
            body_label="Arguments",
            body=printable(self.shown_text()),
        )

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


_KIND_OF_ANSWER: Final[dict[ApprovalAnswer, DecisionKind]] = {
    "allow_once": "approved_once",
    "allow_session": "approved_session",
    "deny": "denied",
}


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The one policy step's outcome for a call (or for a script's calls), carried with it.

    Attributes:
        kind: See :data:`DecisionKind`.
        tools: The registered names it lets run: the one tool of a direct call, or every tool
            a script may call (its read-only tools and its listed, approved write tools).
        reason: Why it was denied, for the model and the records ("" otherwise).
    """

    kind: DecisionKind
    tools: frozenset[str] = frozenset()
    reason: str = ""

    @classmethod
    def from_answer(
        cls, answer: ApprovalAnswer, tools: Iterable[str], *, reason: str = ""
    ) -> Decision:
        """The decision an approval's answer makes (``deny`` → ``denied``, with ``reason``)."""
        kind = _KIND_OF_ANSWER[answer]
        return cls(kind=kind, tools=frozenset(tools), reason=reason if kind == "denied" else "")

    @property
    def runs(self) -> bool:
        """Whether the call runs."""
        return self.kind != "denied"

    def covers(self, name: str) -> bool:
        """Whether this decision lets the tool ``name`` run."""
        return self.runs and name in self.tools


@runtime_checkable
class Approver(Protocol):
    """Answers approval requests: a terminal prompt, an MCP elicitation, allow-all, deny-all."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Return ``allow_once``, ``allow_session`` or ``deny``; never raise for a refusal."""
        ...


def check_approver(approver: object, where: str) -> None:
    """Refuse, where it is given, an ``approver=`` that is no :class:`Approver`.

    Anything with a callable ``approve`` is one (the protocol is structural: no base class, no
    registration), so is None (no approver); anything else, typically a plain function, would
    only fail at the first call that needs an approval, as a denial that hides the mistake.

    Args:
        approver: What the caller passed as ``approver=``.
        where: The entry point, for the message (``"ToolProxy"``, ``"SAgent.run_stream"``).

    Raises:
        TypeError: ``approver`` has no ``approve`` method; the message names it, says what an
            approver is (docs/tools.md, "Permission modes and approvals") and, for a callable,
            how to wrap it.
    """
    if approver is None or callable(getattr(approver, "approve", None)):
        return
    message = (
        f"{where}(approver=...) takes an Approver, an object with an approve(request) method "
        "that answers 'allow_once', 'allow_session' or 'deny' (docs/tools.md, \"Permission "
        f'modes and approvals"), not {approver!r}'
    )
    if callable(approver):
        message += (
            "; to use a function, wrap it in a class whose "
            "'async def approve(self, request)' returns what the function answers"
        )
    raise TypeError(message)


@runtime_checkable
class ExplainsDenial(Protocol):
    """An approver that can say why it denied: whether a person was asked at all."""

    def denial_reason(self, request: ApprovalRequest) -> str:
        """What happened, for the model and the records, after ``approve`` answered ``deny``
        (for example "the user denied ...", or "nobody was asked ...: no terminal")."""
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

    def denial_reason(self, request: ApprovalRequest) -> str:
        """Nobody was asked: this caller denies every approval."""
        return (
            f"nobody was asked to approve {_what(request)}: this session cannot ask for "
            "approvals, so they are denied without asking"
        )


def settle_answer(request: ApprovalRequest, answer: object) -> ApprovalAnswer:
    """The answer that counts: ``answer`` when the request offered it, else ``deny``."""
    for offered in request.offered:
        if answer == offered:
            return offered
    return "deny"


def denial_reason(approver: object, request: ApprovalRequest) -> str:
    """Why ``approver`` denied ``request``: its own words when it can say
    (:class:`ExplainsDenial`), else a neutral "not approved" that claims no user decision."""
    if isinstance(approver, ExplainsDenial):
        return approver.denial_reason(request)
    if request.kind == "script":
        return f"the write tools {', '.join(request.tools)} were not approved"
    return f"the call of {', '.join(request.tools)} was not approved"


def _what(request: ApprovalRequest) -> str:
    if request.kind == "script":
        return f"the write tools {', '.join(request.tools)}"
    return f"the call of {', '.join(request.tools)}"


def approval_needed(
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    *,
    mode: PermissionMode,
    session_id: str,
    granted: Collection[str] = (),
    tool_call_id: str | None = None,
) -> ApprovalRequest | None:
    """What a session's mode asks of one call (``docs/tools.md``, "Permission modes and
    approvals"): the one rule that ``ToolProxy`` and the gateway apply.

    ``read_only`` tools run; ``disabled`` tools never; in ``read_only`` mode nothing else runs;
    ``write`` and ``long_task_only`` tools run in ``auto`` mode, or when the session already
    allowed them (``granted``), and are asked about otherwise; ``destructive`` tools are asked
    about on every call, in every mode.

    Args:
        spec: The tool.
        arguments: The call's arguments (shown in the request).
        mode: The session's permission mode.
        session_id: The calling session.
        granted: The tools the session answered ``allow_session`` for.
        tool_call_id: The model's id of the call, if any.

    Returns:
        None when the call runs without asking; else the request to ask.

    Raises:
        NotAllowedError: the tool is disabled, or the session is read-only.
    """
    permission, name = spec.permission, spec.name
    if permission == "read_only":
        return None
    if permission == "disabled":
        raise NotAllowedError(
            f"tool {name!r} is disabled", details={"name": name, "permission": permission}
        )
    if mode == "read_only":
        raise NotAllowedError(
            f"tool {name!r} is a {permission} tool and this session is read-only",
            hint="Use read-only tools, or ask the user to switch the session to ask or auto.",
            details={"name": name, "permission": permission, "mode": mode},
        )
    if permission != "destructive" and (mode == "auto" or name in granted):
        return None
    return ApprovalRequest.for_tool_call(
        name, arguments, permission=permission, session_id=session_id, tool_call_id=tool_call_id
    )
