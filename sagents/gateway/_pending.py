"""Approvals waiting for an answer from the web console (docs/console.md, "Approvals").

``sagents serve --approvals console|elicitation|both`` chooses who is asked when a call needs an
approval: the MCP client through elicitation (the default), the console, or both at once (the
first answer wins). A request asked of the console waits in :class:`PendingApprovals` until
someone allowed to answer it does, or :data:`~sagents.gateway._approval.APPROVAL_TIMEOUT_S`
passes (then it is denied, as an unanswered elicitation is).

The interface the console uses is two calls: :meth:`PendingApprovals.pending` (what waits) and
:meth:`PendingApprovals.answer` (answer one). Who may answer: the operator (the operator secret
or the gateway's own token; docs/gateway.md, "Threat model"), or the principal whose token
opened the session that asks (:attr:`PendingApproval.owner`).

"Allow for this session" is offered only for a direct call of a write tool, never for a script
(docs/run_script.md, "Approvals") nor for a destructive tool.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio

from sagents.errors import NotAllowedError
from sagents.gateway._approval import (
    APPROVAL_TIMEOUT_S,
    current_client_asker,
)
from sagents.gateway._approval import (
    ClientScriptApprover as _ClientScriptApprover,
)
from sagents.gateway._settings import APPROVAL_ROUTES, ApprovalRoute
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest

__all__ = [
    "APPROVAL_ROUTES",
    "MAX_PENDING_PER_PRINCIPAL",
    "ApprovalRoute",
    "ConsoleScriptApprover",
    "PendingApproval",
    "PendingApprovals",
]

MAX_PENDING_PER_PRINCIPAL = 32
"""Requests of one principal (:attr:`PendingApproval.owner`) waiting at once; one more is denied
at once, so that no client can fill the console (or its memory) with cards."""
logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class PendingApproval:
    """One request waiting in the console.

    Attributes:
        approval_id: Random id (the console's form names it).
        kind: ``call`` (a direct tool call) or ``script`` (a run_script run's write tools).
        session_id: The gateway session that asks.
        owner: Identity of the credential that opened the session ("" without token).
        tools: The tools the approval covers; permissions: their classes, in the same order.
        arguments: A call's arguments as JSON text, whole (the console scrolls); "" for a script.
        script: The script of a run, whole ("" for a call); description: its description as
            one literal line (:meth:`sagents.tool.ApprovalRequest.view`).
        rememberable: Whether "Allow for this session" may be given (a direct write call only).
        created: Unix time, seconds.
    """

    approval_id: str
    kind: Literal["call", "script"]
    session_id: str
    owner: str = ""
    tools: tuple[str, ...]
    permissions: tuple[str, ...] = ()
    arguments: str = ""
    script: str = ""
    description: str = ""
    rememberable: bool = False
    created: float = field(default_factory=time.time)

    @classmethod
    def for_request(cls, request: ApprovalRequest, *, owner: str) -> PendingApproval:
        """The card of a request (``sagents.tool._approval.ApprovalRequest``): a direct call's
        arguments, or a script with its description; "Allow for this session" only where the
        request offers it for a direct call of a write tool."""
        permissions = tuple(str(request.permissions.get(t, "write")) for t in request.tools)
        view = request.view()  # the rendering every channel shows, whole (never cut)
        if request.kind == "script":
            return cls(
                approval_id=secrets.token_urlsafe(16),
                kind="script",
                session_id=request.session_id,
                owner=owner,
                tools=tuple(request.tools),
                permissions=permissions,
                script=view.body,
                description=view.description,
            )
        return cls(
            approval_id=secrets.token_urlsafe(16),
            kind="call",
            session_id=request.session_id,
            owner=owner,
            tools=tuple(request.tools),
            permissions=permissions,
            arguments=view.body,
            rememberable=request.rememberable and permissions == ("write",),
        )

    def to_json(self) -> dict[str, Any]:
        """The card as JSON (the console's live updates)."""
        return {
            "id": self.approval_id,
            "kind": self.kind,
            "session_id": self.session_id,
            "tools": list(self.tools),
            "permissions": list(self.permissions),
            "arguments": self.arguments,
            "script": self.script,
            "description": self.description,
            "rememberable": self.rememberable,
            "created": self.created,
        }


@dataclass(kw_only=True)
class _Waiting:
    item: PendingApproval
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer = "deny"


class PendingApprovals:
    """The requests waiting for a console answer, in memory (one gateway process)."""

    def __init__(self, *, timeout_s: float = APPROVAL_TIMEOUT_S) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._timeout_s = timeout_s
        self._changed = anyio.Event()
        self.listeners: list[Callable[[str], None]] = []
        """Told the session id of each change (the console's live pages); must not block."""
        self.answered: dict[str, int] = {}
        """How many requests ended with each answer (``allow_once``, ``allow_session``,
        ``deny``; ``timeout`` when nobody answered in time): the gateway's metrics."""

    def pending(self, *, owner: str | None = None) -> list[PendingApproval]:
        """What waits, oldest first; ``owner`` given: only what that principal may answer."""
        items = [w.item for w in self._waiting.values()]
        if owner is not None:
            items = [i for i in items if i.owner == owner]
        return sorted(items, key=lambda i: i.created)

    async def changed(self) -> None:
        """Return at the next change (a request added or answered)."""
        await self._changed.wait()

    def _notify(self, session_id: str) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        for listener in list(self.listeners):
            listener(session_id)

    def answer(self, approval_id: str, answer: ApprovalAnswer, *, by: str | None) -> bool:
        """Answer one request; the waiting call goes on at once.

        Args:
            approval_id: The request.
            answer: ``allow_once``, ``allow_session`` (only where :attr:`~PendingApproval.
                rememberable`) or ``deny``.
            by: The identity of who answers; None for the operator (may answer any request).

        Returns:
            False when no such request waits for ``by`` (answered already, timed out, or
            another principal's).

        Raises:
            ValueError: ``allow_session`` for a request that does not offer it.
        """
        waiting = self._waiting.get(approval_id)
        if waiting is None or (by is not None and waiting.item.owner != by):
            return False
        if waiting.done.is_set():
            return False  # the client answered first (``both``); the call goes on with that
        if answer == "allow_session" and not waiting.item.rememberable:
            raise ValueError("'Allow for this session' is not offered for this request")
        waiting.answer = answer
        del self._waiting[approval_id]
        waiting.done.set()
        self._notify(waiting.item.session_id)
        return True

    async def ask(
        self,
        item: PendingApproval,
        *,
        client: Callable[[], Awaitable[ApprovalAnswer | None]] | None = None,
    ) -> ApprovalAnswer:
        """Wait for the console's answer (and the client's, when ``client`` is given).

        Args:
            item: The card to show.
            client: Asks the MCP client too (``--approvals both``); its first answer wins, as
                a console answer does. None from it means it could not be asked.

        Returns:
            The answer; ``deny`` when nobody answered within the timeout, or at once when
            :data:`MAX_PENDING_PER_PRINCIPAL` requests of the same owner wait already.
        """
        if len(self.pending(owner=item.owner)) >= MAX_PENDING_PER_PRINCIPAL:
            logger.warning(
                "denied %s without asking: %d approvals of the same client wait in the console "
                "already",
                ", ".join(item.tools),
                MAX_PENDING_PER_PRINCIPAL,
            )
            return "deny"
        waiting = _Waiting(item=item)
        self._waiting[item.approval_id] = waiting
        self._notify(item.session_id)
        answer: ApprovalAnswer = "deny"
        try:
            with anyio.move_on_after(self._timeout_s):
                async with anyio.create_task_group() as tg:

                    async def from_client() -> None:
                        assert client is not None
                        got = await client()
                        if got is not None and not waiting.done.is_set():
                            waiting.answer = got
                            waiting.done.set()

                    if client is not None:
                        tg.start_soon(from_client)
                    await waiting.done.wait()
                    tg.cancel_scope.cancel()
            answer = waiting.answer if waiting.done.is_set() else "deny"
            outcome = answer if waiting.done.is_set() else "timeout"
            self.answered[outcome] = self.answered.get(outcome, 0) + 1
        finally:
            if self._waiting.pop(item.approval_id, None) is not None:
                self._notify(item.session_id)
        return answer


class ConsoleScriptApprover:
    """run_script's approver when the console is asked: a card with the script, its
    description and its write tools; with ``both``, the client is asked at the same time
    (:class:`~sagents.gateway._approval.ClientScriptApprover`).

    Args:
        pending: Where the card waits.
        route: ``console`` or ``both``.
        owner_of: The identity of a session's credential (see :attr:`PendingApproval.owner`);
            None takes the credential of the gateway call the run belongs to.
        permission_of: A tool's permission class, for the card.
    """

    def __init__(
        self,
        pending: PendingApprovals,
        *,
        route: ApprovalRoute,
        owner_of: Callable[[str], str] | None = None,
        permission_of: Callable[[str], str] | None = None,
    ) -> None:
        self._pending = pending
        self._route = route
        self._owner_of = owner_of
        self._permission_of = permission_of
        self._client = _ClientScriptApprover()

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask "allow once" / "deny" for the script's write tools."""
        asker = current_client_asker()
        if self._owner_of is not None:
            owner = self._owner_of(request.session_id)
        else:
            owner = asker.identity if asker is not None else ""
        item = PendingApproval.for_request(request, owner=owner)
        if self._permission_of is not None:
            item = replace(item, permissions=tuple(self._permission_of(t) for t in item.tools))
        client: Callable[[], Awaitable[ApprovalAnswer | None]] | None = None
        if self._route == "both" and asker is not None and asker.can_ask:

            async def ask_client() -> ApprovalAnswer | None:
                try:
                    return await self._client.approve(request)
                except NotAllowedError:  # too long for its prompt, or it cannot be asked
                    # on this connection: the console only
                    return None

            client = ask_client
        answer = await self._pending.ask(item, client=client)
        return "allow_once" if answer == "allow_once" else "deny"

    def denial_reason(self, request: ApprovalRequest) -> str:
        """Why the run was not approved."""
        return (
            f"the user did not approve the write tools {', '.join(request.tools)} "
            "(denied in the console or by the client, or no answer in time)"
        )
