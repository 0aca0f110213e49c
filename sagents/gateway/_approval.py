"""Approvals of gateway calls: the one approval protocol (:mod:`sagents.tool._approval`) asked
through MCP elicitation.

When a call needs an approval (the session's mode, :func:`sagents.tool._approval.approval_needed`),
the gateway asks the client with an MCP elicitation (MCP spec 2025-11-25, "Elicitation", form
mode) whose one field, ``decision``, offers the request's answers: "allow once", "allow for
this session" (not for destructive tools, nor on 2026-07-28 connections) and "deny". A client
that did not declare the elicitation capability cannot be asked: the call is refused with a text
that says how to allow it.

The gateway decides each call once, before it runs (so that the question precedes any
background hand-off, and a 2026-07-28 client can be asked through ``InputRequiredResult``), a
run_script's one approval included; the :class:`~sagents.tool.Decision` travels with the call
in its ``SessionContext`` and nothing further down asks again (docs/architecture.md, "The
decision").
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from typing import Any, Final

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.core._literal import printable
from sagents.errors import NotAllowedError
from sagents.gateway._http_security import request_credential
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest, settle_answer

__all__ = [
    "APPROVAL_TIMEOUT_S",
    "CLIENT_ASKER",
    "ClientAsker",
    "ClientScriptApprover",
    "ElicitationApprover",
    "GatewayCallApprover",
    "answer_from_elicitation",
    "approval_form",
    "current_client_asker",
    "denial_text",
    "refusal_text",
]

_ARGUMENTS_PREVIEW_CHARS = 2000  # characters of the arguments (or script) shown in a request
APPROVAL_TIMEOUT_S = 600.0
"""Seconds an approval request may wait for the user; no answer by then denies the call."""

_CHOICE_TITLES: Final[dict[ApprovalAnswer, str]] = {
    "allow_once": "Allow once",
    "allow_session": "Allow for this session",
    "deny": "Deny",
}

logger = logging.getLogger(__name__)


def _cut(text: str, tail: str) -> str:
    return text if len(text) <= _ARGUMENTS_PREVIEW_CHARS else text[:_ARGUMENTS_PREVIEW_CHARS] + tail


def approval_form(request: ApprovalRequest) -> tuple[str, mt.ElicitRequestedSchema]:
    """The elicitation message and its requested schema for ``request``.

    Returns:
        ``(message, schema)``: the message names the tool and its class with its arguments, or
        a script's write tools, description and source (either cut past 2,000 characters); the
        schema has one required enum field ``decision`` offering :attr:`ApprovalRequest.offered`.
    """
    if request.kind == "script":
        text = (
            f"run_script wants to call the write tools {', '.join(request.tools)} "
            f"({request.description}). Script:\n{_cut(request.script or '', chr(10) + '…')}"
        )
    else:
        tool = request.tools[0]
        arguments = json.dumps(dict(request.arguments or {}), ensure_ascii=False, sort_keys=True)
        text = (
            f"Allow the {request.permissions.get(tool, 'write')} tool {tool!r} to run with "
            f"arguments {_cut(arguments, ' …')}?"
        )
    message = printable(text)  # the model's text: no control characters to the user
    schema: mt.ElicitRequestedSchema = {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "oneOf": [{"const": c, "title": _CHOICE_TITLES[c]} for c in request.offered],
            }
        },
        "required": ["decision"],
    }
    return message, schema


def answer_from_elicitation(result: mt.ElicitResult, request: ApprovalRequest) -> ApprovalAnswer:
    """Read the user's answer from an elicitation result.

    Anything but an accepted form with a decision the request offered is ``deny`` (decline,
    cancel, a missing or unknown value, "allow for this session" where it was not offered).
    """
    if result.action != "accept" or not result.content:
        return "deny"
    return settle_answer(request, result.content.get("decision"))


class ClientAsker:
    """Asks the user behind the MCP request being served, through form elicitation.

    The gateway binds one to :data:`CLIENT_ASKER` while a call runs, so that an approver deeper
    down (run_script's, for the one approval before a script) can ask the same client.
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    @property
    def identity(self) -> str:
        """The identity of the request's credential ("" without a token): who besides the
        operator may answer an approval of this call in the console."""
        return request_credential(self._ctx.request).identity

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


_NOT_ASKED: ContextVar[bool] = ContextVar("sagents_script_approval_not_asked", default=False)
"""Set when the last script approval of this context could not reach the client."""


class ClientScriptApprover:
    """run_script's approver inside the gateway: asks the client of the current call.

    It gets the one approval before a run (``ApprovalRequest.for_script``, which offers
    ``allow_once`` and ``deny``) and answers ``deny`` when no client can be asked (no
    elicitation, or outside a gateway call).
    """

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the request's answers for the script's write tools."""
        _NOT_ASKED.set(False)
        asker = CLIENT_ASKER.get()
        if asker is None or not asker.can_ask:
            return "deny"
        message, schema = approval_form(request)
        try:
            result = await asker.choose(message, schema)
        except NoBackChannelError:
            _NOT_ASKED.set(True)  # read back by denial_reason in this same task
            return "deny"
        return answer_from_elicitation(result, request)

    def denial_reason(self, request: ApprovalRequest) -> str:
        """Whether the client was asked (the user declined or did not answer) or could not be."""
        asker = CLIENT_ASKER.get()
        asked = asker is not None and asker.can_ask and not _NOT_ASKED.get()
        return denial_text(request, asked=asked)


def denial_text(request: ApprovalRequest, *, asked: bool) -> str:
    """Why a script's write tools do not run: the user was asked and did not approve them, or
    nobody could be asked."""
    tools = ", ".join(request.tools)
    if not asked:
        return (
            f"nobody was asked to approve the write tools {tools}: this MCP client cannot "
            "show approval requests (it did not declare the elicitation capability)"
        )
    return (
        f"the user did not approve the write tools {tools} "
        "(declined, cancelled or no answer in time)"
    )


class GatewayCallApprover:
    """An approver for a ``ToolProxy`` that a gateway call reaches undecided: asks the client
    of the current call through elicitation. (The gateway's own calls arrive decided, in
    their ``SessionContext``: the proxy does not ask.)

    Raises ``NotAllowedError`` (the call is refused, saying how to allow it) when nobody can be
    asked.
    """

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """The client's answer."""
        asker = CLIENT_ASKER.get()
        if asker is not None and asker.can_ask:
            try:
                return await ElicitationApprover(asker).approve(request)
            except NoBackChannelError:
                pass
        raise NotAllowedError(refusal_text(request), details={"tool": request.tools[0]})


def current_client_asker() -> ClientAsker | None:
    """The asker bound to the gateway call running in this context, or None."""
    return CLIENT_ASKER.get()


def refusal_text(request: ApprovalRequest) -> str:
    """The text of a call refused because nobody could be asked: says how to allow it."""
    tool = request.tools[0]
    permission = request.permissions.get(tool, "write")
    base = (
        f"The call of {tool!r} needs an approval ({permission} tool), and this "
        "MCP client cannot show approval requests (it did not declare the elicitation capability)."
    )
    if permission == "destructive":
        return (
            base + " Destructive tools are approved one call at a time: use a client that "
            "supports MCP elicitation, or have the operator reclassify the tool as 'write' in the "
            "sagents config and run `sagents serve --mode auto`."
        )
    return (
        base + " To allow it, use a client that supports MCP elicitation, or restart the gateway "
        "with `sagents serve --mode auto` (write tools then run without asking)."
    )
