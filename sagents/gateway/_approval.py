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

import logging
from collections.abc import Callable
from typing import Any, Final

import anyio
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.errors import NotAllowedError
from sagents.gateway._http_security import request_credential
from sagents.gateway._questions import ElicitationQuestioner
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest, settle_answer
from sagents.tool._context import running_context

__all__ = [
    "APPROVAL_TIMEOUT_S",
    "ELICITATION_MAX_CHARS",
    "ClientAsker",
    "ClientScriptApprover",
    "ElicitationApprover",
    "GatewayCallApprover",
    "answer_from_elicitation",
    "approval_form",
    "current_client_asker",
    "denial_text",
    "refusal_text",
    "too_long_text",
]

ELICITATION_MAX_CHARS = 4000
"""The longest approval message sent to an MCP client, in characters; a longer request is not
asked there (docs/gateway.md, "Approvals")."""
APPROVAL_TIMEOUT_S = 600.0
"""Seconds an approval request may wait for the user; no answer by then denies the call."""

_CHOICE_TITLES: Final[dict[ApprovalAnswer, str]] = {
    "allow_once": "Allow once",
    "allow_session": "Allow for this session",
    "deny": "Deny",
}

logger = logging.getLogger(__name__)


def approval_form(request: ApprovalRequest) -> tuple[str, mt.ElicitRequestedSchema]:
    """The elicitation message and its requested schema for ``request``.

    Returns:
        ``(message, schema)``: the message is the request's one structured rendering
        (:meth:`~sagents.tool.ApprovalRequest.view`), whole; the schema has one required enum
        field ``decision`` offering :attr:`ApprovalRequest.offered`.

    Raises:
        NotAllowedError: the rendering is longer than :data:`ELICITATION_MAX_CHARS`: it is
            never sent cut, and the error says where it can be approved whole.
    """
    message = request.view().text()
    if len(message) > ELICITATION_MAX_CHARS:
        raise NotAllowedError(
            too_long_text(request, len(message)), details={"tools": list(request.tools)}
        )
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


def too_long_text(request: ApprovalRequest, length: int) -> str:
    """Why a request was not asked through elicitation: it cannot be shown there whole."""
    what = (
        f"run_script's write tools {', '.join(request.tools)}"
        if request.kind == "script"
        else f"the call of {request.tools[0]!r}"
    )
    smaller = "a shorter script" if request.kind == "script" else "smaller arguments"
    return (
        f"the approval of {what} was not asked: it is {length:,} characters long, more than an "
        f"MCP client's approval prompt is trusted to show whole ({ELICITATION_MAX_CHARS:,}), "
        "and nobody approves what they cannot read. Approve it in the web console, which "
        "shows every request whole (start the gateway with `--approvals console` or "
        f"`--approvals both`, then open /console/approvals), or send {smaller}"
    )


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

    The gateway gives each call one, carried by the call's ``SessionContext`` (its questioner,
    an :class:`~sagents.gateway._questions.ElicitationQuestioner`), so that an approver deeper
    down (run_script's, for the one approval before a script) can ask the same client
    (:func:`current_client_asker`).
    """

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], *, timeout_s: float = APPROVAL_TIMEOUT_S
    ) -> None:
        self._ctx = ctx
        self.timeout_s = timeout_s
        """Seconds an answer is waited for (``approvals.timeoutSec``); then it is a cancel."""
        self.on_answer: Callable[[ApprovalAnswer], None] | None = None
        """Told the answer of each approval asked through :meth:`approval` (the gateway's
        ``sagents_approvals_answered_total``)."""

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
        """Send the elicitation; a timeout (:attr:`timeout_s`) or a failure is a cancel.

        Raises:
            NoBackChannelError: the connection cannot carry the request.
        """
        with anyio.move_on_after(self.timeout_s):
            try:
                return await self._ctx.session.elicit_form(message, schema, self._ctx.request_id)
            except NoBackChannelError:
                raise
            except MCPError as error:
                logger.info("elicitation failed: %s", error)
        return mt.ElicitResult(action="cancel")

    async def approval(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask for ``request``'s approval (:func:`approval_form`) and read the answer (no
        answer in time is ``deny``).

        Raises:
            NoBackChannelError: the connection cannot carry the request.
        """
        message, schema = approval_form(request)
        answer = answer_from_elicitation(await self.choose(message, schema), request)
        if self.on_answer is not None:
            self.on_answer(answer)
        return answer


class ElicitationApprover:
    """An :class:`Approver` that asks the MCP client (handshake-era connections).

    On 2026-07-28 connections the gateway asks through ``InputRequiredResult`` instead, with the
    same :func:`approval_form`.
    """

    def __init__(self, asker: ClientAsker) -> None:
        self._asker = asker

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Send the elicitation and map the answer (no answer in time counts as ``deny``)."""
        return await self._asker.approval(request)


class ClientScriptApprover:
    """run_script's approver inside the gateway: asks the client of the current call.

    It gets the one approval before a run (``ApprovalRequest.for_script``, which offers
    ``allow_once`` and ``deny``) and answers ``deny`` when no client can be asked (no
    elicitation, or outside a gateway call). A connection that declared elicitation but cannot
    carry the question is refused with that reason (``NotAllowedError``, which the script's
    runner records): the approver keeps no state between ``approve`` and ``denial_reason``.
    """

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask the request's answers for the script's write tools."""
        asker = current_client_asker()
        if asker is None or not asker.can_ask:
            return "deny"
        try:
            return await asker.approval(request)
        except NoBackChannelError:
            raise NotAllowedError(
                denial_text(request, asked=False), details={"tools": list(request.tools)}
            ) from None

    def denial_reason(self, request: ApprovalRequest) -> str:
        """Whether the client was asked (the user declined or did not answer) or could not be."""
        asker = current_client_asker()
        return denial_text(request, asked=asker is not None and asker.can_ask)


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
        asker = current_client_asker()
        if asker is not None and asker.can_ask:
            try:
                return await ElicitationApprover(asker).approve(request)
            except NoBackChannelError:
                pass
        raise NotAllowedError(refusal_text(request), details={"tool": request.tools[0]})


def current_client_asker() -> ClientAsker | None:
    """The asker of the gateway call running in this context, or None (outside a gateway call).

    The asker travels with the call, as its ``SessionContext.questioner``; this reads it from
    the context of the tool call running now (``ToolManager.call`` and the gateway bind each
    call with its context). Code that has the call should read it there:
    ``call.session_context.questioner``.
    """
    context = running_context()
    questioner = None if context is None else context.questioner
    return questioner.asker if isinstance(questioner, ElicitationQuestioner) else None


def refusal_text(request: ApprovalRequest) -> str:
    """The text of a call refused because nobody could be asked: says how to allow it (a
    client that elicits, the web console's approvals page, or ``--mode auto`` for writes)."""
    tool = request.tools[0]
    permission = request.permissions.get(tool, "write")
    base = (
        f"The call of {tool!r} needs an approval ({permission} tool), and this "
        "MCP client cannot show approval requests (it did not declare the elicitation capability)."
    )
    console = (
        "have the operator answer it in the web console (`sagents serve --transport http "
        "--approvals console`, or `--approvals both` to ask clients that can as well)"
    )
    if permission == "destructive":
        return (
            base + f" Destructive tools are approved one call at a time: use a client that "
            f"supports MCP elicitation, {console}, or have the operator reclassify the tool as "
            "'write' in the sagents config and run `sagents serve --mode auto`."
        )
    return (
        base + f" To allow it, use a client that supports MCP elicitation, {console}, or "
        "restart the gateway with `sagents serve --mode auto` (write tools then run without "
        "asking)."
    )
