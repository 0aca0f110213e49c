"""Approvals of gateway calls: the :class:`Approver` seam and its MCP-elicitation implementation.

When a call needs an approval (see :mod:`sagents.gateway.policy`), the gateway asks the client
with an MCP elicitation (MCP spec 2025-11-25, "Elicitation", form mode) whose one field,
``decision``, offers "allow once", "allow for this session" (not for destructive tools) and
"deny". A client that did not declare the elicitation capability cannot be asked: the call is
refused with a text that says how to allow it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.core.literal import printable
from sagents.core.permissions import PermissionClass

__all__ = [
    "APPROVAL_TIMEOUT_S",
    "CLIENT_ASKER",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "ClientAsker",
    "ClientScriptApprover",
    "ElicitationApprover",
    "ScriptApprovalLike",
    "StaticApprover",
    "answer_from_elicitation",
    "approval_form",
    "current_client_asker",
    "refusal_text",
]

ApprovalAnswer = Literal["allow_once", "allow_session", "deny"]

_ARGUMENTS_PREVIEW_CHARS = 2000  # characters of the arguments shown in an approval request
APPROVAL_TIMEOUT_S = 600.0
"""Seconds an approval request may wait for the user; no answer by then denies the call."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One call waiting for approval.

    Attributes:
        tool: The tool's name.
        arguments: The arguments the client sent.
        permission: The tool's permission class.
        session_id: The calling session.
        rememberable: Whether "allow for this session" may be offered (false for destructive).
    """

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    permission: PermissionClass = "write"
    session_id: str = ""
    rememberable: bool = True


class Approver(Protocol):
    """Decides whether a call may run (the seam shared with run_script's approvals)."""

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Return the user's answer; never raises for a plain refusal."""
        ...


@dataclass(frozen=True, kw_only=True)
class StaticApprover:
    """Always gives the same answer (``allow_once`` for auto, ``deny`` for deny-all)."""

    answer: ApprovalAnswer

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Return :attr:`answer`."""
        return self.answer


def approval_form(request: ApprovalRequest) -> tuple[str, mt.ElicitRequestedSchema]:
    """The elicitation message and its requested schema for ``request``.

    Returns:
        ``(message, schema)``: the message names the tool, its class and its arguments (cut past
        2,000 characters); the schema has one required enum field ``decision``.
    """
    arguments = json.dumps(dict(request.arguments), ensure_ascii=False, sort_keys=True)
    if len(arguments) > _ARGUMENTS_PREVIEW_CHARS:
        arguments = arguments[:_ARGUMENTS_PREVIEW_CHARS] + " …"
    message = printable(  # the arguments are the model's: no control characters to the user
        f"Allow the {request.permission} tool {request.tool!r} to run with arguments {arguments}?"
    )
    choices = (
        ["allow_once", "allow_session", "deny"] if request.rememberable else ["allow_once", "deny"]
    )
    names = {
        "allow_once": "Allow once",
        "allow_session": "Allow for this session",
        "deny": "Deny",
    }
    schema: mt.ElicitRequestedSchema = {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "oneOf": [{"const": c, "title": names[c]} for c in choices],
            }
        },
        "required": ["decision"],
    }
    return message, schema


def answer_from_elicitation(result: mt.ElicitResult, request: ApprovalRequest) -> ApprovalAnswer:
    """Read the user's answer from an elicitation result.

    Anything but an accepted form with a known decision is ``deny`` (decline, cancel, a missing or
    unknown value, "allow for this session" where it was not offered).
    """
    if result.action != "accept" or not result.content:
        return "deny"
    decision = result.content.get("decision")
    if decision == "allow_once":
        return "allow_once"
    if decision == "allow_session" and request.rememberable:
        return "allow_session"
    return "deny"


class ClientAsker:
    """Asks the user behind the MCP request being served, through form elicitation.

    The gateway binds one to :data:`CLIENT_ASKER` while a call runs, so that an approver deeper
    down (run_script's, for the one approval before a script) can ask the same client.
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    @property
    def can_ask(self) -> bool:
        """Whether the client declared elicitation and this request can carry a request to it.

        On 2026-07-28 connections a server cannot send requests in the middle of a call (they
        ask through ``InputRequiredResult`` before it), so this is false there.
        """
        declared = self._ctx.session.check_client_capability(
            mt.ClientCapabilities(elicitation=mt.ElicitationCapability())
        )
        return (
            declared
            and self._ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and self._ctx.session.can_send_request
        )

    async def choose(self, message: str, schema: mt.ElicitRequestedSchema) -> mt.ElicitResult:
        """Send the elicitation; a timeout (``APPROVAL_TIMEOUT_S``) or a failure is a cancel.

        Raises:
            NoBackChannelError: the connection cannot carry the request.
        """
        with anyio.move_on_after(APPROVAL_TIMEOUT_S):
            try:
                return await self._ctx.session.elicit_form(message, schema, self._ctx.request_id)
            except NoBackChannelError:
                raise
            except MCPError as error:
                logger.info("elicitation failed: %s", error)
        return mt.ElicitResult(action="cancel")


CLIENT_ASKER: ContextVar[ClientAsker | None] = ContextVar("sagents_client_asker", default=None)
"""The :class:`ClientAsker` of the gateway call running in this context, or None."""


class ElicitationApprover:
    """An :class:`Approver` that asks the MCP client (handshake-era connections).

    On 2026-07-28 connections the gateway asks through ``InputRequiredResult`` instead, with the
    same :func:`approval_form`.
    """

    def __init__(self, asker: ClientAsker) -> None:
        self._asker = asker

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Send the elicitation and map the answer (no answer in time counts as ``deny``)."""
        message, schema = approval_form(request)
        return answer_from_elicitation(await self._asker.choose(message, schema), request)


class ScriptApprovalLike(Protocol):
    """run_script's approval request (``sagents.script.policy.ApprovalRequest``)."""

    @property
    def tools(self) -> tuple[str, ...]: ...
    @property
    def script(self) -> str: ...
    @property
    def description(self) -> str: ...


_NOT_ASKED: ContextVar[bool] = ContextVar("sagents_script_approval_not_asked", default=False)
"""Set when the last script approval of this context could not reach the client."""


class ClientScriptApprover:
    """run_script's approver inside the gateway: asks the client of the current call.

    Answers ``allow_once`` or ``deny`` (the only answers run_script's approval has); ``deny``
    when no client can be asked (no elicitation, or outside a gateway call).
    """

    async def approve(self, request: ScriptApprovalLike) -> Literal["allow_once", "deny"]:
        """Ask "allow once" / "deny" for the script's write tools."""
        _NOT_ASKED.set(False)
        asker = CLIENT_ASKER.get()
        if asker is None or not asker.can_ask:
            return "deny"
        script = request.script
        if len(script) > _ARGUMENTS_PREVIEW_CHARS:
            script = script[:_ARGUMENTS_PREVIEW_CHARS] + "\n…"
        message = printable(  # the model's description and script, shown literally
            f"run_script wants to call the write tools {', '.join(request.tools)} "
            f"({request.description}). Script:\n{script}"
        )
        generic = ApprovalRequest(tool="run_script", rememberable=False)
        try:
            result = await asker.choose(message, approval_form(generic)[1])
        except NoBackChannelError:
            _NOT_ASKED.set(True)  # read back by denial_reason in this same task
            return "deny"
        return "allow_once" if answer_from_elicitation(result, generic) == "allow_once" else "deny"

    def denial_reason(self, request: ScriptApprovalLike) -> str:
        """Whether the client was asked (the user declined or did not answer) or could not be."""
        tools = ", ".join(request.tools)
        asker = CLIENT_ASKER.get()
        if asker is None or not asker.can_ask or _NOT_ASKED.get():
            return (
                f"nobody was asked to approve the write tools {tools}: this MCP client cannot "
                "show approval requests (it did not declare the elicitation capability)"
            )
        return (
            f"the user did not approve the write tools {tools} "
            "(declined, cancelled or no answer in time)"
        )


def current_client_asker() -> ClientAsker | None:
    """The asker bound to the gateway call running in this context, or None."""
    return CLIENT_ASKER.get()


def refusal_text(request: ApprovalRequest) -> str:
    """The text of a call refused because nobody could be asked: says how to allow it."""
    base = (
        f"The call of {request.tool!r} needs an approval ({request.permission} tool), and this "
        "MCP client cannot show approval requests (it did not declare the elicitation capability)."
    )
    if request.permission == "destructive":
        return (
            base + " Destructive tools are approved one call at a time: use a client that "
            "supports MCP elicitation, or have the operator reclassify the tool as 'write' in the "
            "sagents config and run `sagents serve --mode auto`."
        )
    return (
        base + " To allow it, use a client that supports MCP elicitation, or restart the gateway "
        "with `sagents serve --mode auto` (write tools then run without asking)."
    )
