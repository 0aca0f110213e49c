"""``SessionContext``: who is calling, from where, under which permission mode.

A caller passes a SessionContext with every ``run_tool`` call (docs/agent.md, "Session state and
``SessionContext``"). Its trusted values reach a tool only through parameters the tool declares
as injected (a parameter annotated with ``SessionContext``, or
``Annotated[T, InjectedArg("key")]``); they never override an argument the model sent by matching
its name, and injected parameters never appear in the model's schema.

Code running inside a call that was not handed its context (a no-argument public reader such as
``sagents.agent.current_agent_session()``) finds it with :func:`running_context`: the context
the call's progress binding carries, the one context variable that says which call runs now
(docs/architecture.md, "Per-call state").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sagents.core._permissions import PermissionMode
from sagents.progress._binding import raw_tool_call
from sagents.tool._approval import Decision
from sagents.tool.questions import Questioner

__all__ = ["InjectedArg", "SessionContext", "running_context"]


PRINCIPAL_KEY = "principal"
"""The ``SessionContext.trusted`` key of the calling session's principal (a token's identity,
``""`` without a token): the gateway sets it; quotas and upstream logins are per principal."""


@dataclass(frozen=True, kw_only=True)
class SessionContext:
    """The calling session.

    Attributes:
        session_id: Identifies the session (progress, background tasks and approvals are
            scoped to it). A random id by default.
        user_id: The end user, if known.
        workspace: The session's workspace directory, as the sandbox sees it (a string, since a
            remote sandbox's paths are not host paths), or None.
        permission_mode: ``ask``, ``auto`` or ``read_only``.
        agent: The calling agent's name within the session (sub-agents of one session share
            its todo list; memories are scoped per user and agent), or None.
        trusted: Values the host vouches for (tenant, auth subject, ...), injected only into
            parameters declared with :class:`InjectedArg`.
        decision: The decision the policy step in front of this call already made (the
            gateway, run_script's pre-run check, an outer ``ToolProxy``); a ``ToolProxy``
            honours it instead of deciding again. None: not decided yet. Only the host that
            made the decision sets it (docs/architecture.md, "The decision").
        questioner: Who answers the ``questionnaire`` tool's questions in this session: the
            host's channel to the user (the agent loop's events, ``sagents serve``'s MCP
            elicitation, ``sagents chat``'s terminal form). None: nobody can be asked, and
            ``questionnaire`` refuses saying so (docs/builtin_tools.md).
        granted: The tools this session's user allowed for the rest of the session ("Allow
            for this session"), as the host that keeps its grants says (the agent loop): a
            policy step in front of a call that lists tools, such as run_script's one approval,
            does not ask about these again. The gateway keeps its sessions' grants in its store
            and reads them there.
    """

    session_id: str = field(default_factory=lambda: os.urandom(16).hex())  # 32 hex digits
    user_id: str | None = None
    workspace: str | None = None
    permission_mode: PermissionMode = "ask"
    agent: str | None = None
    trusted: Mapping[str, Any] = field(default_factory=dict)
    decision: Decision | None = None
    questioner: Questioner | None = field(default=None, compare=False, repr=False)
    granted: frozenset[str] = frozenset()

    def lookup(self, key: str) -> Any:
        """Return the trusted value ``key``: one of the fields above, else ``trusted[key]``.

        Raises:
            KeyError: when the context has no such value.
        """
        if key in ("session_id", "user_id", "workspace", "permission_mode", "agent"):
            return getattr(self, key)
        return self.trusted[key]


@dataclass(frozen=True)
class InjectedArg:
    """Marks a tool parameter as injected by the host: ``Annotated[str, InjectedArg("user_id")]``.

    Args:
        key: The :meth:`SessionContext.lookup` key; None means the parameter's own name.
    """

    key: str | None = None


def running_context() -> SessionContext | None:
    """The context of the tool call running in this context (the one its progress binding
    carries: ``ToolManager.call`` and the gateway's call pipeline bind each call with its
    context), or None outside a call or for a call bound without one."""
    binding = raw_tool_call()
    context = None if binding is None else binding.session_context
    return context if isinstance(context, SessionContext) else None
