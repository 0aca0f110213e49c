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
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from sagents.core._permissions import PermissionMode
from sagents.gateway._http_security import Credential
from sagents.gateway._offer import SessionOffer
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._policy import Profile
from sagents.gateway._runtime import ConfiguredGateway
from sagents.tool._provider import ToolProvider
from sagents.tool._tool_proxy import ToolProxy

__all__ = ["MAX_OFFERS", "chat_tools"]

MAX_OFFERS = 1000
"""Threads' offers kept alive for the gateway (which keeps offers weakly), the least recently
run dropped first (a dropped thread's next run makes a new one)."""


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
            offer = SessionOffer(gateway.manager, mode=mode, profile=profile)
        offers[session_id] = offer
        offers.move_to_end(session_id)
        while len(offers) > MAX_OFFERS:
            offers.popitem(last=False)
        gateway.adopt_offer(session_id, offer)
        if not known:
            return ToolProxy(gateway.manager, available_tools=[]), mode
        return ToolProxy(gateway.manager, [spec.name for spec in offer.list_specs()]), mode

    return tools_for
