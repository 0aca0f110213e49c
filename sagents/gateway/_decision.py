"""The one policy step of a gateway call (docs/architecture.md, "The decision").

:meth:`CallDecider.decide` turns a ``tools/call`` of a session into the
:class:`~sagents.tool.Decision` that travels with the call, asking the user first when the
session's mode says so: through the configured approver, the web console, an MCP elicitation
(handshake-era connections) or an ``InputRequiredResult`` (2026-07-28 connections, whose answer
comes back with the call's retry and its sealed ``requestState``). A run_script's one approval
is asked here too, before anything runs, exactly like a direct call's. A refused or denied
direct call is its result here; nothing further down decides again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import ApprovalDeniedError, NotAllowedError
from sagents.gateway._approval import (
    ClientAsker,
    ElicitationApprover,
    answer_from_elicitation,
    approval_form,
    denial_text,
    refusal_text,
)
from sagents.gateway._convert import to_call_tool_result
from sagents.gateway._http_security import request_credential
from sagents.gateway._offer import ScriptHost
from sagents.gateway._pending import ApprovalRoute, PendingApproval, PendingApprovals
from sagents.gateway._restart import RESTART_REASON
from sagents.gateway._sessions import GatewaySession
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.store._embedded import call_digest, keyed_call_digest
from sagents.store._open import GatewayStore
from sagents.store._protocols import ApprovalStore
from sagents.tool._approval import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    Decision,
    DecisionKind,
    approval_needed,
    settle_answer,
)

__all__ = ["ABORTED_WAITING", "APPROVAL_INPUT_KEY", "CallDecider"]

APPROVAL_INPUT_KEY = "sagents_approval"
"""Key of the approval elicitation in an ``InputRequiredResult`` (2026-07-28 connections)."""
ABORTED_WAITING = (
    f"aborted: {RESTART_REASON} while this run waited for its approval; nothing of it ran. "
    "Call run_script again to ask again"
)
"""The refusal of a run_script whose approval was answered after a restart (runs are never
resumed, docs/run_script.md)."""


class CallDecider:
    """Decides each call of the gateway's sessions, once.

    Args:
        approvals: Where grants and 2026-07-28 approval nonces are kept (the store's, shared
            by replicas, or in memory).
        approver: Decides instead of asking anyone (tests, a terminal); None asks.
        route: Who is asked: the client (``elicitation``), the console, or ``both``.
        pending: Where approvals wait for the console.
        scripts: The run_script host (a run_script's one approval covers its write tools);
            None: run_script is an ordinary tool, if the provider has one.
        script_preflight: Check a run_script's script before its approval is asked.
        timeout_s: Seconds an approval asked of the client waits.
        store: The shared store, which tells whether the replica that asked an approval is
            alive; None: not replicated.
        approval_key: Binds 2026-07-28 approvals to the token and profile across processes
            (None: to the session of this process).
        replica_id: This process's name among replicas, or None.
        boot: Names this process among the earlier and later processes of the gateway.
    """

    def __init__(
        self,
        *,
        approvals: ApprovalStore,
        approver: Approver | None,
        route: ApprovalRoute,
        pending: PendingApprovals,
        scripts: ScriptHost | None,
        script_preflight: bool,
        timeout_s: float,
        store: GatewayStore | None = None,
        approval_key: bytes | None = None,
        replica_id: str | None = None,
        boot: str,
    ) -> None:
        self._approvals = approvals
        self._approver = approver
        self._route: ApprovalRoute = route
        self._pending = pending
        self._scripts = scripts
        self._preflight = script_preflight
        self._timeout_s = timeout_s
        self._store = store
        self._approval_key = approval_key
        self._replica_id = replica_id
        self.boot = boot
        """This process (tells an approval asked before a restart)."""
        self.elicited: dict[str, int] = {}
        """Approvals asked of the MCP client alone (elicitation) that ended, by answer."""

    def client_asker(self, ctx: ServerRequestContext[Any, Any]) -> ClientAsker:
        """Asks the client of ``ctx``, waiting at most the approval timeout."""
        return self.counting(ClientAsker(ctx, timeout_s=self._timeout_s))

    def counting(self, asker: ClientAsker) -> ClientAsker:
        """``asker`` counting the approvals its client answers, when the client alone is asked
        (with ``both``, the console's queue counts the answer that wins)."""
        if self._route == "elicitation" and self._approver is None:
            asker.on_answer = self._elicitation_answered
        return asker

    def _elicitation_answered(self, answer: ApprovalAnswer) -> None:
        self.elicited[answer] = self.elicited.get(answer, 0) + 1

    async def decide(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        session: GatewaySession,
        spec: ToolSpec,
        arguments: dict[str, Any],
    ) -> Decision | mt.CallToolResult | mt.InputRequiredResult:
        """The :class:`Decision` that travels with the call, asking the user first when the
        session's mode says so; a refused or denied direct call is its result here. A
        run_script's decision, denied ones too, goes to its run (whose summary and records
        say why nothing ran).

        Raises:
            StoreError: the session's grants or the approval's ``requestState`` could not be
                read or written (the call is then refused, and a nonce is not spent).
        """
        # grants are kept in the store: replicas share them (docs/scale-out.md)
        granted = (
            frozenset()
            if spec.permission == "read_only" and spec.name != RUN_SCRIPT_TOOL_NAME
            else await self._approvals.granted(session.session_id)
        )
        script = spec.name == RUN_SCRIPT_TOOL_NAME and self._scripts is not None
        try:
            if script:
                request, covered = session.offer.script_approval(
                    arguments,
                    granted=granted,
                    session_id=session.session_id,
                    preflight=self._preflight,
                )
            else:
                covered = frozenset({spec.name})
                request = approval_needed(
                    spec, arguments, mode=session.mode, session_id=session.session_id,
                    granted=granted,
                )  # fmt: skip
        except NotAllowedError as refused:  # not offered either: a tool the filter let through
            return to_call_tool_result(ToolResult.from_exception(refused))
        if request is None:  # nothing to ask: the mode, or a grant this or another replica kept
            kind: DecisionKind = "approved_session" if covered & granted else "allowed"
            return Decision(kind=kind, tools=covered)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and request.rememberable:
            # one session per token: a grant must not leak to another client
            request = replace(request, offered=("allow_once", "deny"))
        try:
            asked = await self._ask(ctx, params, session, request)
        except NotAllowedError as unshowable:  # too long to be shown whole where it was asked
            if script:
                return Decision(kind="denied", tools=covered, reason=unshowable.message)
            return to_call_tool_result(ToolResult.from_exception(unshowable))
        if isinstance(asked, mt.InputRequiredResult):
            return asked
        if script:
            reason = denial_text(request, asked=asked is not None)
            return Decision.from_answer(asked or "deny", covered, reason=reason)
        if asked is None:
            return to_call_tool_result(_refused(request))
        if asked == "deny":
            return to_call_tool_result(_denied(request))
        if asked == "allow_session":
            await self._approvals.grant(session.session_id, spec.name)
        return Decision.from_answer(asked, covered)

    async def _ask(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        session: GatewaySession,
        request: ApprovalRequest,
    ) -> ApprovalAnswer | mt.InputRequiredResult | None:
        """The answer; an ``InputRequiredResult`` to ask a 2026-07-28 client; None to refuse."""
        if self._approver is not None:
            return settle_answer(request, await self._approver.approve(request))
        can_elicit = ctx.session.check_client_capability(
            mt.ClientCapabilities(elicitation=mt.ElicitationCapability())
        )
        if self._route != "elicitation":
            return await self._ask_console(ctx, params, session, request, can_elicit=can_elicit)
        if not can_elicit:
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            response = (params.input_responses or {}).get(APPROVAL_INPUT_KEY)
            tool, arguments = params.name, dict(params.arguments or {})  # bound to this call
            owner = self._approval_owner(session)
            if isinstance(response, mt.ElicitResult) and await self._approvals.redeem(
                params.request_state, owner, tool, arguments
            ):
                if request.kind == "script" and await self._asked_before_restart(
                    params.request_state
                ):
                    raise NotAllowedError(ABORTED_WAITING, details={"reason": RESTART_REASON})
                answer = answer_from_elicitation(response, request)
                self._elicitation_answered(answer)
                return answer
            issued = json.loads(await self._approvals.issue(owner, tool, arguments))
            state = json.dumps({**issued, "replica": self._replica_id, "boot": self.boot})
            message, schema = approval_form(request)
            elicit = mt.ElicitRequest(
                params=mt.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
            return mt.InputRequiredResult(
                input_requests={APPROVAL_INPUT_KEY: elicit}, request_state=state
            )
        try:
            return await ElicitationApprover(self.client_asker(ctx)).approve(request)
        except NoBackChannelError:
            return None  # this connection cannot carry a server-to-client request

    def _approval_owner(self, session: GatewaySession) -> str:
        """What a 2026-07-28 approval is bound to: the client's session; with a store key
        (one that outlives the process, or that replicas share) the token and profile that
        session stands for, so that the answer may reach another process (a restarted one
        draws new session ids)."""
        if self._approval_key is None:
            return session.session_id
        name = f"{session.identity}:{session.profile.name if session.profile else ''}"
        return hmac.new(self._approval_key, name.encode(), hashlib.sha256).hexdigest()[:32]

    def _call_of(self, tool: str, arguments: dict[str, Any]) -> str:
        """What a held console approval is bound to besides its client: the tool and its
        arguments, digested with the approval key when there is one, so that the row in the
        store cannot confirm a guess of an argument (a secret redacted from the card)."""
        if self._approval_key is None:
            return call_digest(tool, arguments)
        return keyed_call_digest(self._approval_key, tool, arguments)

    async def _asked_before_restart(self, state: str | None) -> bool:
        """Whether the (sealed, so genuine) ``requestState`` was issued by a gateway process
        that is gone: an earlier process of this one (a restart), or a replica whose lease ran
        out. run_script's rule is that such a run is aborted, never resumed
        (docs/run_script.md); an approval a live replica asked may be answered here."""
        try:
            issued = json.loads(state or "")
        except ValueError:
            return False
        if not isinstance(issued, dict) or issued.get("boot") == self.boot:
            return False
        replica = issued.get("replica")
        if self._store is None or replica is None or replica == self._replica_id:
            return True
        return not await self._store.replica_alive(str(replica))

    async def _ask_console(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        session: GatewaySession,
        request: ApprovalRequest,
        *,
        can_elicit: bool,
    ) -> ApprovalAnswer:
        """Ask the console (and, with ``both``, a client that can be asked mid-call).

        A 2026-07-28 client's direct call is bound to the client (its token and profile) and
        the call: sent again after a restart, it takes the answer the console gave to the
        restored card (once), or waits on that card (docs/console.md, "Approvals").

        Raises:
            StoreError: the recorded answer could not be read (the call is refused).
        """
        binding = call = ""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and request.kind != "script":
            binding = self._approval_owner(session)
            call = self._call_of(params.name, dict(params.arguments or {}))
            recorded = await self._approvals.take(binding, call)
            if recorded is not None:
                return settle_answer(request, recorded)
        owner = request_credential(ctx.request).identity
        client = None
        if (
            self._route == "both"
            and can_elicit
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):

            async def client() -> ApprovalAnswer | None:
                try:
                    return await ElicitationApprover(self.client_asker(ctx)).approve(request)
                except (NoBackChannelError, NotAllowedError):  # NotAllowed: too long to show
                    return None

        return await self._pending.ask(
            PendingApproval.for_request(request, owner=owner),
            client=client,
            binding=binding,
            call=call,
        )


def _denied(request: ApprovalRequest) -> ToolResult:
    return ToolResult.from_exception(
        ApprovalDeniedError(
            f"the call of {request.tools[0]!r} was not approved",
            hint=(
                "the user did not approve it (declined, cancelled or no answer in time); "
                "do not retry the same call without asking the user"
            ),
            details={"tool": request.tools[0]},
        )
    )


def _refused(request: ApprovalRequest) -> ToolResult:
    return ToolResult.from_exception(
        NotAllowedError(refusal_text(request), details={"tool": request.tools[0]})
    )
