"""What the console's Chat page may call, per login (docs/console.md, "Chat").

A console login acts as the token it logged in with: the operator (the operator secret,
``SAGENTS_GATEWAY_TOKEN``) chats with the tools the gateway's own sessions are offered (its
``--profile`` and ``--mode``), a profile's token with that profile's tools and mode, the same
offer as an MCP session opened with that token (:class:`~sagents.gateway._offer.SessionOffer`).
Anyone else (an OAuth login, whose scopes the console does not keep) is offered no tool. The
offer is read at the start of each run, so a configuration reload applies to the next one; the
gateway adopts it as the offer of the thread's session, so that the tools that read a session's
offer (the skill tools: the profile's skills) read this one, and a loaded skill's
``allowed-tools`` narrows the thread's offer from its next run on.

``run_script`` is offered when the gateway offers it to the login's sessions, and runs on the
gateway's script host (the same sandbox per session, limits, records, and one ``gateway_call``
audit entry per run) in the thread's gateway session: :func:`script_session_id` of the
thread's session id (a gateway session id is 32 hex digits and names directories; a thread's
id is the client's). Its one approval is the gateway's policy
step (:meth:`~sagents.gateway._offer.SessionOffer.script_approval`), asked before the run
through the chat's approver (the page's approval card), as ``tools/call`` asks a client
before a session's run: the decision travels with the call, nothing further down asks again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from sagents.core._permissions import PermissionMode
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.errors import InvalidArgumentsError, NotAllowedError
from sagents.gateway._approval import denial_text
from sagents.gateway._http_security import Credential
from sagents.gateway._offer import SessionOffer
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._policy import Profile
from sagents.gateway._runtime import ConfiguredGateway
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME
from sagents.tool._approval import ApprovalAnswer, Decision, settle_answer
from sagents.tool._arguments import parse_arguments
from sagents.tool._call import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._provider import ToolProvider
from sagents.tool._spec_provider import SpecProvider
from sagents.tool._tool_proxy import ToolProxy

__all__ = ["MAX_OFFERS", "ChatOffer", "chat_tools", "script_session_id"]

MAX_OFFERS = 1000
"""Threads' offers kept alive for the gateway (which keeps offers weakly), the least recently
run dropped first (a dropped thread's next run makes a new one)."""


def script_session_id(session_id: str) -> str:
    """The gateway session a chat thread's scripts run in: the first 32 hex digits of the
    SHA-256 of the thread's session id (``chat:`` + its ``threadId``), so that the id names
    the session's workspace and logs as a gateway session id does, and no client picks
    another's."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def chat_tools(
    gateway: ConfiguredGateway, secret: OperatorSecret
) -> Callable[[str, str], tuple[ToolProvider, PermissionMode]]:
    """The tools and permission mode of each login identity's chat runs (see the module doc).

    Args:
        gateway: The served gateway (its registry, profiles and tokens).
        secret: The operator secret the console accepts.
    """

    offers: OrderedDict[str, SessionOffer] = OrderedDict()

    def tools_for(identity: str, session_id: str) -> tuple[ToolProvider, PermissionMode]:
        operators = [secret.value, gateway.settings.bearer_token or ""]
        profile: Profile | None = gateway.profile
        known = any(token and Credential(token).identity == identity for token in operators)
        for token, bound in gateway.token_profiles.items():
            if Credential(token).identity == identity:
                profile, known = bound, True
        mode: PermissionMode = (profile.mode if profile else None) or gateway.mode
        offer = offers.get(session_id)
        if offer is None or offer.profile != profile or offer.mode != mode:
            # kept while the settings stay: a loaded skill's allowed-tools narrowed it
            offer = SessionOffer(
                gateway.manager, mode=mode, profile=profile, scripts=gateway.scripts
            )
        offers[session_id] = offer
        offers.move_to_end(session_id)
        while len(offers) > MAX_OFFERS:
            offers.popitem(last=False)
        gateway.adopt_offer(session_id, offer)
        if not known:
            return ToolProxy(gateway.manager, available_tools=[]), mode
        chat = ChatOffer(
            offer, preflight=gateway.script_preflight, session_call=gateway.session_call
        )
        return ToolProxy(chat, [spec.name for spec in offer.list_specs()]), mode

    return tools_for


class ChatOffer(SpecProvider):
    """A chat thread's tools: its session's offer, with run_script's one approval decided
    before the run (see the module docstring).

    Args:
        offer: The thread's session offer.
        preflight: Check a script before its approval is asked (the gateway's setting).
        session_call: Marks a run of the script session in flight, so that the gateway
            releases its sandboxes once it idles (``Gateway.session_call``); None: never.
    """

    def __init__(
        self,
        offer: SessionOffer,
        *,
        preflight: bool,
        session_call: Callable[[str], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.offer = offer
        self.preflight = preflight
        self.session_call = session_call

    def list_specs(self) -> list[ToolSpec]:
        """The offered tools (``run_script`` last, when offered)."""
        return self.offer.list_specs()

    async def call(self, request: ToolRequest) -> ToolResult:
        """Run an offered tool; a run_script with the decision of its one approval."""
        if request.name == RUN_SCRIPT_TOOL_NAME and self.offer.scripts is not None:
            context = request.session_context or SessionContext()
            decision = await self._script_decision(request, context)
            session_id = script_session_id(context.session_id)
            scripts = replace(context, session_id=session_id, decision=decision)
            request = replace(request, session_context=scripts)
            with self.session_call(session_id) if self.session_call else nullcontext():
                return await self.offer.call(request)
        return await self.offer.call(request)

    async def _script_decision(self, request: ToolRequest, context: SessionContext) -> Decision:
        try:
            arguments = dict(parse_arguments(request.name, request.arguments))
        except InvalidArgumentsError:  # the call's own validation says what is wrong
            arguments = {}
        asked, covered = self.offer.script_approval(
            arguments,
            granted=context.granted,  # the thread's session grants (its agent keeps them)
            session_id=context.session_id,
            preflight=self.preflight,
            tool_call_id=request.tool_call_id,
        )
        if asked is None:
            return Decision(kind="allowed", tools=covered)
        if request.approver is None:
            reason = f"nobody could be asked to approve the write tools {', '.join(asked.tools)}"
            return Decision(kind="denied", tools=covered, reason=reason)
        answer: ApprovalAnswer = "deny"
        try:
            answer = settle_answer(asked, await request.approver.approve(asked))
        except NotAllowedError as refused:  # the approver could not ask: its reason
            return Decision(kind="denied", tools=covered, reason=refused.message)
        return Decision.from_answer(answer, covered, reason=denial_text(asked, asked=True))
