"""What the console's Chat page may call, per login (docs/console.md, "Chat").

A console login acts as the token it logged in with: the operator (the operator secret,
``SAGENTS_GATEWAY_TOKEN``) chats with the tools the gateway's own sessions are offered (its
``--profile`` and ``--mode``), a profile's token with that profile's tools and mode, the same
offer as an MCP session opened with that token (:class:`~sagents.gateway._offer.SessionOffer`).
Anyone else (an OAuth login, whose scopes the console does not keep) is offered no tool. The
offer is read at the start of each run, so a configuration reload applies to the next one.
"""

from __future__ import annotations

from collections.abc import Callable

from sagents.core._permissions import PermissionMode
from sagents.gateway._http_security import Credential
from sagents.gateway._offer import SessionOffer
from sagents.gateway._operator_secret import OperatorSecret
from sagents.gateway._policy import Profile
from sagents.gateway._runtime import ConfiguredGateway
from sagents.tool._provider import ToolProvider
from sagents.tool._tool_proxy import ToolProxy

__all__ = ["chat_tools"]


def chat_tools(
    gateway: ConfiguredGateway, secret: OperatorSecret
) -> Callable[[str], tuple[ToolProvider, PermissionMode]]:
    """The tools and permission mode of each login identity's chat runs (see the module doc).

    Args:
        gateway: The served gateway (its registry, profiles and tokens).
        secret: The operator secret the console accepts.
    """

    def tools_for(identity: str) -> tuple[ToolProvider, PermissionMode]:
        operators = [secret.value, gateway.settings.bearer_token or ""]
        profile: Profile | None = gateway.profile
        known = any(token and Credential(token).identity == identity for token in operators)
        for token, bound in gateway.token_profiles.items():
            if Credential(token).identity == identity:
                profile, known = bound, True
        mode: PermissionMode = (profile.mode if profile else None) or gateway.mode
        if not known:
            return ToolProxy(gateway.manager, available_tools=[]), mode
        offer = SessionOffer(gateway.manager, mode=mode, profile=profile)
        return ToolProxy(gateway.manager, [spec.name for spec in offer.list_specs()]), mode

    return tools_for
