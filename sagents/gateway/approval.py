"""Approvals of gateway calls: the :class:`Approver` seam and its MCP-elicitation implementation.

When a call needs an approval (see :mod:`sagents.gateway.policy`), the gateway asks the client
with an MCP elicitation (MCP spec 2025-11-25, "Elicitation", form mode) whose one field,
``decision``, offers "allow once", "allow for this session" (not for destructive tools) and
"deny". A client that did not declare the elicitation capability cannot be asked: the call is
refused with a text that says how to allow it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import mcp_types as mt
from mcp.server.session import ServerSession

from sagents.core.permissions import PermissionClass

__all__ = [
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "ElicitationApprover",
    "StaticApprover",
    "answer_from_elicitation",
    "approval_form",
    "refusal_text",
]

ApprovalAnswer = Literal["allow_once", "allow_session", "deny"]

_ARGUMENTS_PREVIEW_CHARS = 2000  # characters of the arguments shown in an approval request


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
    message = (
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


class ElicitationApprover:
    """Asks the client through ``elicitation/create`` on the request's channel.

    For connections that can send server-to-client requests (the handshake era: stdio, and HTTP
    with a session). On 2026-07-28 connections the gateway asks through ``InputRequiredResult``
    instead, with the same :func:`approval_form`.
    """

    def __init__(self, session: ServerSession, related_request_id: mt.RequestId | None) -> None:
        self._session = session
        self._related_request_id = related_request_id

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Send the elicitation and map the answer (a client error counts as ``deny``)."""
        message, schema = approval_form(request)
        result = await self._session.elicit_form(message, schema, self._related_request_id)
        return answer_from_elicitation(result, request)


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
