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

import json
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio

from sagents.errors import NotAllowedError, StoreError
from sagents.gateway._approval import (
    APPROVAL_TIMEOUT_S,
    current_client_asker,
)
from sagents.gateway._approval import (
    ClientScriptApprover as _ClientScriptApprover,
)
from sagents.gateway._settings import APPROVAL_ROUTES, ApprovalRoute
from sagents.store._held import HeldApproval
from sagents.store._protocols import ApprovalStore
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest

__all__ = [
    "APPROVAL_ROUTES",
    "MAX_PENDING_PER_PRINCIPAL",
    "ApprovalRoute",
    "ConsoleScriptApprover",
    "HeldCards",
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
        restored: Asked by a gateway process that is gone (a restart): no call waits for
            this card; its answer is recorded once in the store.
        resumable: (restored cards) the client may send the call again and then takes the
            recorded answer (a 2026-07-28 client's direct call); otherwise the client is gone
            and the call never runs.
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
    restored: bool = False
    resumable: bool = False

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

    def stored(self) -> dict[str, Any]:
        """The card as the store keeps it (:meth:`from_stored` reads it back)."""
        return {**self.to_json(), "owner": self.owner}

    @classmethod
    def from_stored(cls, card: dict[str, Any], *, resumable: bool) -> PendingApproval:
        """A card the store kept, restored: nothing waits for it in this process, and
        "Allow for this session" is not offered (the session it was asked in is gone).

        Raises:
            KeyError, TypeError, ValueError: not a card :meth:`stored` wrote.
        """
        kind = card["kind"]
        if kind not in ("call", "script"):
            raise ValueError(f"unknown kind {kind!r}")
        return cls(
            approval_id=str(card["id"]),
            kind=kind,
            session_id=str(card["session_id"]),
            owner=str(card["owner"]),
            tools=tuple(str(t) for t in card["tools"]),
            permissions=tuple(str(p) for p in card["permissions"]),
            arguments=str(card["arguments"]),
            script=str(card["script"]),
            description=str(card["description"]),
            created=float(card["created"]),
            restored=True,
            resumable=resumable,
        )


@dataclass(kw_only=True)
class _Waiting:
    item: PendingApproval
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer = "deny"
    binding: str = ""
    call: str = ""
    expires_at: float = math.inf
    recording: bool = False
    """A card whose answer the store is recording: not shown, not answerable, but a client's
    call sent again still waits on it (and goes on with that answer)."""
    held: bool = False
    """Its row is in the store (a restart would show it again until it is removed)."""

    @classmethod
    def restored_from(cls, held: HeldApproval) -> _Waiting:
        """The card a gone process held, shown again.

        Raises:
            KeyError, TypeError, ValueError: not a card this release wrote.
        """
        card = PendingApproval.from_stored(json.loads(held.card), resumable=bool(held.binding))
        return cls(
            item=card, binding=held.binding, call=held.call, expires_at=held.expires_at, held=True
        )


def _as_is(card: Any) -> Any:
    return card


@dataclass(frozen=True, kw_only=True)
class HeldCards:
    """Where :class:`PendingApprovals` holds its cards beyond this process, so that a restart
    shows them again (:meth:`PendingApprovals.refresh`).

    Attributes:
        store: Where the cards are held (the gateway's store).
        asker: This process (``<replica id>/<boot id>``).
        gone: Whether the process that held a card (its ``asker``) is gone.
        redact: Applied to a card before it is written (the gateway's known secrets); None:
            the card as it is.
    """

    store: ApprovalStore
    asker: str
    gone: Callable[[str], Awaitable[bool]]
    redact: Callable[[Any], Any] | None = None


class PendingApprovals:
    """The requests waiting for a console answer: in memory, and held in the store when
    built with ``held``, so that a restart shows their cards again (:meth:`refresh`).

    Args:
        timeout_s: How long a request waits for an answer (then it is denied).
        held: Where the cards are held beyond this process (built by
            :meth:`sagents.gateway._process.GatewayProcess.held_cards`); None: in memory only.
    """

    def __init__(
        self, *, timeout_s: float = APPROVAL_TIMEOUT_S, held: HeldCards | None = None
    ) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._timeout_s = timeout_s
        self._changed = anyio.Event()
        self.listeners: list[Callable[[str], None]] = []
        """Told the session id of each change (the console's live pages); must not block."""
        self.answered: dict[str, int] = {}
        """How many requests ended with each answer (``allow_once``, ``allow_session``,
        ``deny``; ``timeout`` when nobody answered in time): the gateway's metrics."""
        self._store: ApprovalStore | None = held.store if held is not None else None
        self._asker = held.asker if held is not None else ""
        self._gone: Callable[[str], Awaitable[bool]] | None = (
            held.gone if held is not None else None
        )
        self._redact: Callable[[Any], Any] = (
            held.redact if held is not None and held.redact is not None else _as_is
        )
        if self._store is not None:  # answers another replica's console gave
            self._store.on_settled(self._settled_elsewhere)

    def pending(self, *, owner: str | None = None) -> list[PendingApproval]:
        """What waits, oldest first; ``owner`` given: only what that principal may answer."""
        now = time.time()
        items = [w.item for w in self._waiting.values() if w.expires_at > now and not w.recording]
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

    async def refresh(self) -> None:
        """Show again the cards a gone gateway process held (a restart, or a replica whose
        lease ran out) and that nobody answered yet; drop the restored cards another process
        answered or removed since, and let a call waiting here take an answer recorded for it
        (both heard at once from a store that tells, :meth:`ApprovalStore.on_settled`; this
        catches what was not heard). A store out of reach is logged, and what is in memory
        stays."""
        if self._store is None or self._gone is None:
            return
        try:
            held = await self._store.held()
            restored: list[_Waiting] = []
            for h in held:
                if h.answer is not None or h.approval_id in self._waiting:
                    continue
                if h.asker == self._asker or not await self._gone(h.asker):
                    continue
                restored.append(_Waiting.restored_from(h))
        except StoreError as error:
            logger.warning("the console's held approvals are not readable now: %s", error)
            return
        except (KeyError, TypeError, ValueError) as error:  # written by another release
            logger.warning("a held approval could not be read: %r", error)
            return
        now, unanswered = time.time(), {h.approval_id for h in held if h.answer is None}
        for approval_id, shown in list(self._waiting.items()):
            # expired, or answered (or taken) elsewhere; one recorded here now is left to that
            gone_by = shown.expires_at <= now or approval_id not in unanswered
            if shown.item.restored and not shown.recording and gone_by:
                del self._waiting[approval_id]
                self._notify(shown.item.session_id)
        recorded = {(h.binding, h.call) for h in held if h.answer is not None and h.binding}
        for waiting in list(self._waiting.values()):
            if not waiting.item.restored and (waiting.binding, waiting.call) in recorded:
                await self._take_recorded(waiting)
        for waiting in restored:
            if waiting.item.approval_id not in self._waiting:
                self._waiting[waiting.item.approval_id] = waiting
                self._notify(waiting.item.session_id)

    def answer(self, approval_id: str, answer: ApprovalAnswer, *, by: str | None) -> bool:
        """Answer one request whose call waits in this process; the call goes on at once, and
        its card is removed from the store after (:meth:`settle` removes it first, so that an
        answer is never shown again after a restart: what the console uses).

        Args:
            approval_id: The request.
            answer: ``allow_once``, ``allow_session`` (only where :attr:`~PendingApproval.
                rememberable`) or ``deny``.
            by: The identity of who answers; None for the operator (may answer any request).

        Returns:
            False when no such request waits for ``by`` (answered already, timed out,
            another principal's, or restored: use :meth:`settle`).

        Raises:
            ValueError: ``allow_session`` for a request that does not offer it.
        """
        waiting = self._waiting.get(approval_id)
        if waiting is None or (by is not None and waiting.item.owner != by):
            return False
        if waiting.done.is_set() or waiting.item.restored or waiting.recording:
            return False  # the client answered first (``both``); the call goes on with that
        _check_offered(waiting.item, answer)
        waiting.answer = answer
        del self._waiting[approval_id]
        waiting.done.set()
        self._notify(waiting.item.session_id)
        return True

    async def settle(self, approval_id: str, answer: ApprovalAnswer, *, by: str | None) -> bool:
        """Answer one request, whether its call waits here or its card was restored after a
        restart: then the answer is recorded once in the store (another process or a second
        answer finds it answered), for the client to take when it sends the call again
        (:attr:`PendingApproval.resumable`); otherwise nothing runs. A call waiting here goes
        on once its card is removed from the store, so that a restart never shows an answered
        card again.

        Returns:
            False when no such request waits for ``by``.

        Raises:
            ValueError: ``allow_session`` for a request that does not offer it.
            StoreError: the store could not record the answer, or remove the card of a call
                waiting here (the card is shown again; a waiting call keeps waiting).
        """
        waiting = self._waiting.get(approval_id)
        if waiting is None or waiting.recording or (by is not None and waiting.item.owner != by):
            return False
        if not waiting.item.restored:
            return await self._answer_held(waiting, answer, by=by)
        if answer == "allow_session":
            raise ValueError("'Allow for this session' is not offered for this request")
        assert self._store is not None
        # Hidden while it is recorded, but kept: the client's call sent again meanwhile
        # waits on it and goes on with this answer (a second card would leave the recorded
        # answer for a later sending to run on), and a refresh does not show it again.
        waiting.recording = True
        self._notify(waiting.item.session_id)
        try:
            recorded = await self._store.settle(approval_id, answer)
        except StoreError:
            waiting.recording = False
            self._notify(waiting.item.session_id)
            raise
        waiting.recording = False
        if recorded or waiting.item.restored:  # else a client waits on it: it stays asked
            self._waiting.pop(approval_id, None)
        if recorded and not waiting.item.restored:  # the call sent again goes on with it
            waiting.answer = answer
            waiting.done.set()  # counted by its ask, as an answer in this process is
        self._notify(waiting.item.session_id)
        if recorded and waiting.item.restored:
            self.answered[answer] = self.answered.get(answer, 0) + 1
            logger.info(
                "approval %s of %s answered %s after a restart: %s",
                approval_id,
                ", ".join(waiting.item.tools),
                answer,
                "the client takes it when it sends the call again"
                if waiting.item.resumable
                else "its client is gone, the call does not run",
            )
        return recorded

    async def _answer_held(
        self, waiting: _Waiting, answer: ApprovalAnswer, *, by: str | None
    ) -> bool:
        """:meth:`answer`, after removing the card from the store: the removal is what makes
        the answer durable (a card left there would be shown again after a restart, answered
        already and its call gone on)."""
        approval_id = waiting.item.approval_id
        if not waiting.held or waiting.done.is_set():
            return self.answer(approval_id, answer, by=by)
        _check_offered(waiting.item, answer)
        assert self._store is not None  # held: written there
        waiting.recording = True  # hidden while it is removed: a second answer finds none
        self._notify(waiting.item.session_id)
        try:
            await self._store.release(approval_id)
        except StoreError:
            waiting.recording = False
            self._notify(waiting.item.session_id)
            raise
        waiting.recording, waiting.held = False, False
        return self.answer(approval_id, answer, by=by)

    async def _settled_elsewhere(self, approval_id: str) -> None:
        """Another gateway process recorded the answer of a held card: shown here, the card
        leaves the console; a client's call waiting here on it (or on a card of the same client
        and call) takes the answer and goes on."""
        shown = self._waiting.get(approval_id)
        if shown is not None and shown.item.restored and not shown.recording:
            del self._waiting[approval_id]
            self._notify(shown.item.session_id)
        for waiting in list(self._waiting.values()):
            if waiting.binding and not waiting.item.restored:
                await self._take_recorded(waiting)

    async def _take_recorded(self, waiting: _Waiting) -> None:
        """Let the call waiting on ``waiting`` go on with the answer recorded in the store for
        its client and call (:meth:`ApprovalStore.take`), if there is one."""
        if self._store is None or waiting.done.is_set():
            return
        try:
            recorded = await self._store.take(waiting.binding, waiting.call)
        except StoreError as error:  # it waits on: a later answer, or its timeout
            logger.warning("a recorded answer could not be taken now: %s", error)
            return
        if recorded is not None and not waiting.done.is_set():
            waiting.answer = "allow_once" if recorded == "allow_once" else "deny"
            waiting.done.set()

    def _restored(self, item: PendingApproval, binding: str, call: str) -> _Waiting | None:
        """A restored card of the same client and call that nobody answered: the call the
        client sends again waits on it."""
        if not binding:
            return None
        for waiting in self._waiting.values():
            if (
                waiting.item.restored
                and waiting.binding == binding
                and waiting.call == call
                and waiting.item.owner == item.owner
                and waiting.expires_at > time.time()
            ):
                return waiting
        return None

    async def _hold(self, waiting: _Waiting) -> None:
        """Write the card to the store; out of reach, it waits in memory only (logged)."""
        if self._store is None:
            return
        item = waiting.item
        try:
            await self._store.hold(
                HeldApproval(
                    approval_id=item.approval_id,
                    binding=waiting.binding,
                    call=waiting.call,
                    card=json.dumps(self._redact(item.stored())),
                    asker=self._asker,
                    asked_at=item.created,
                    expires_at=waiting.expires_at,
                )
            )
        except StoreError as error:
            logger.warning(
                "approval %s waits in memory only (a restart ends it): %s", item.approval_id, error
            )
        else:
            waiting.held = True

    async def _release(self, approval_id: str) -> None:
        if self._store is None:
            return
        with anyio.CancelScope(shield=True):  # before the call goes on, whatever ends the wait
            try:
                await self._store.release(approval_id)
            except StoreError as error:
                logger.warning("approval %s stays held in the store: %s", approval_id, error)

    async def ask(
        self,
        item: PendingApproval,
        *,
        client: Callable[[], Awaitable[ApprovalAnswer | None]] | None = None,
        binding: str = "",
        call: str = "",
    ) -> ApprovalAnswer:
        """Wait for the console's answer (and the client's, when ``client`` is given).

        Args:
            item: The card to show.
            client: Asks the MCP client too (``--approvals both``); its first answer wins, as
                a console answer does. None from it means it could not be asked.
            binding: A 2026-07-28 client's token and profile, keyed (its "session"), with
                ``call``, the digest of the tool and arguments: the same call sent again after
                a restart waits on the restored card. "" for everything else.
            call: See ``binding``.

        Returns:
            The answer; ``deny`` when nobody answered within the timeout, or at once when
            :data:`MAX_PENDING_PER_PRINCIPAL` requests of the same owner wait already.
        """
        waiting = self._restored(item, binding, call)
        if waiting is not None:
            waiting.item = replace(waiting.item, restored=False, resumable=False)
            item = waiting.item
            self._notify(item.session_id)
        else:
            if len(self.pending(owner=item.owner)) >= MAX_PENDING_PER_PRINCIPAL:
                logger.warning(
                    "denied %s without asking: %d approvals of the same client wait in the "
                    "console already",
                    ", ".join(item.tools),
                    MAX_PENDING_PER_PRINCIPAL,
                )
                return "deny"
            expires_at = time.time() + self._timeout_s
            waiting = _Waiting(item=item, binding=binding, call=call, expires_at=expires_at)
            await self._hold(waiting)
            self._waiting[item.approval_id] = waiting
            self._notify(item.session_id)
        answer: ApprovalAnswer = "deny"
        try:
            if binding:  # recorded elsewhere since the caller looked? (heard from now on)
                await self._take_recorded(waiting)
            with anyio.move_on_after(max(0.0, waiting.expires_at - time.time())):
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
            if waiting.held:  # no answer in time, the client's, or a cancelled call
                await self._release(item.approval_id)
        return answer


def _check_offered(item: PendingApproval, answer: ApprovalAnswer) -> None:
    if answer == "allow_session" and not item.rememberable:
        raise ValueError("'Allow for this session' is not offered for this request")


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
