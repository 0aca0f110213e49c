"""Session policy of the gateway: which tools a session is offered (docs/gateway.md).

- ``disabled`` tools are never offered;
- in ``read_only`` mode only ``read_only`` tools are offered;
- a profile narrows what is offered to its servers and tools.

Which offered calls need an approval is the one rule of the tool layer,
:func:`sagents.tool._approval.approval_needed` (docs/tools.md, "Permission modes and approvals").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSpec

__all__ = ["Profile", "is_offered"]


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A named set of what a client may use (docs/gateway.md).

    Attributes:
        name: The profile's name (``--profile NAME``).
        servers: Upstream server names whose tools are offered; None offers every server.
        tools: Tool names offered (``<server>__<tool>`` or local names); None offers all that
            the servers filter lets through.
        skills: Skill names offered; None offers every skill (passed on to the skills layer).
        prompts: Upstream prompt names offered (``<server>__<prompt>``); None offers every
            prompt of the offered servers.
        resources: Glob patterns (``*`` within a path segment, ``**`` across segments) of the
            normalised upstream resource URIs and templates
            offered (``sagents://upstream/<server>/...``); None offers every one of the
            offered servers.
        mode: The permission mode of sessions under this profile; None keeps the gateway's.
        bearer_token_env: Over HTTP, the environment variable holding the bearer token that
            selects this profile; None binds no token.
        scopes: Over HTTP with OAuth, the scopes that select this profile: an access token
            holding all of them gets the first such profile in the config's order; None:
            selected by no scope.
    """

    name: str
    servers: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    skills: frozenset[str] | None = None
    prompts: frozenset[str] | None = None
    resources: frozenset[str] | None = None
    mode: PermissionMode | None = None
    bearer_token_env: str | None = field(default=None, repr=False)
    scopes: frozenset[str] | None = None


def is_offered(spec: ToolSpec, mode: PermissionMode, profile: Profile | None = None) -> bool:
    """Whether a session in ``mode`` under ``profile`` sees ``spec`` in ``tools/list``."""
    if spec.permission == "disabled":
        return False
    if mode == "read_only" and spec.permission != "read_only":
        return False
    if profile is None:
        return True
    if (
        profile.servers is not None
        and spec.source.kind == "mcp"
        and spec.source.server not in profile.servers
    ):
        return False
    return profile.tools is None or spec.name in profile.tools
