"""Command hooks: the config's ``hooks.preToolUse`` / ``hooks.postToolUse`` as one
:class:`~sagents.tool.ToolMiddleware` (docs/gateway.md, "Hooks").

Each hook is a command (an argument vector, run as the gateway's user, outside any sandbox: the
operator's code) for the tools its ``match`` glob names. It gets one JSON object on stdin and
answers with its exit status and stdout, in the manner of Claude Code's hooks:

- exit 0: stdout is read. Empty: nothing to say (the call goes on / the result is kept). A
  pre hook's object ``{"decision": "allow" | "deny" | "ask", "reason": ..., "arguments":
  {...}}`` (rewritten arguments are validated again); a post hook's ``{"content": [...]}``
  replaces the result's content blocks (MCP content: ``{"type": "text", "text": ...}``, ...).
- exit 2: a pre hook denies the call, a post hook withholds the result; stderr is the reason
  the model reads.
- anything else, a hook that does not answer within ``timeoutSec``, or stdout that is not such
  an object: the hook failed. ``onError: "deny"`` (the default) refuses the call (or withholds
  the result) saying which hook failed and how; ``"allow"`` goes on as if it said nothing.

The input object carries the documented names and Claude Code's: ``event``
(``preToolUse``/``postToolUse``) and ``hook_event_name``; ``tool`` and ``tool_name``;
``arguments`` and ``tool_input``; ``session`` and ``session_id``; ``principal``;
``permission`` (the tool's permission class) and ``permission_mode`` (the session's mode);
``tool_call_id`` and ``tool_use_id``; a post hook also ``result`` and ``tool_response``
(``{"content": [...], "isError": ..., "structuredContent": ...}``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field, TypeAdapter, ValidationError

from sagents.core._result import ContentBlock, ToolResult
from sagents.errors import NotAllowedError
from sagents.tool._call import ToolRequest
from sagents.tool._context import PRINCIPAL_KEY
from sagents.tool._middleware import HookDecision

__all__ = ["CommandHook", "CommandHooks"]

logger = logging.getLogger(__name__)

_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
_CONTENT: TypeAdapter[list[ContentBlock]] = TypeAdapter(
    list[Annotated[ContentBlock, Field(discriminator="type")]]
)


@dataclass(frozen=True, kw_only=True)
class CommandHook:
    """One configured hook.

    Attributes:
        event: ``preToolUse`` or ``postToolUse``.
        match: A glob over the tool's registered name (``fleet__*``; ``*`` for every tool).
        command: The argument vector (no shell).
        timeout_s: Seconds the command may take.
        on_error: What a failed hook means: ``deny`` (refuse / withhold) or ``allow``.
    """

    event: Literal["preToolUse", "postToolUse"]
    match: str
    command: tuple[str, ...]
    timeout_s: float = 5.0
    on_error: Literal["deny", "allow"] = "deny"

    def matches(self, tool: str) -> bool:
        """Whether this hook runs for ``tool``."""
        return fnmatch.fnmatchcase(tool, self.match)


class _HookFailed(Exception):
    """A hook that failed (see the module docstring); the message says how."""


class CommandHooks:
    """The configured command hooks as one :class:`~sagents.tool.ToolMiddleware`.

    Args:
        hooks: The hooks, in file order (pre hooks run in that order; the first ``deny`` ends
            the call, the first ``ask`` makes it ask).
        permission_of: The permission class of a registered tool (for the input's
            ``permission``); None: not known.
    """

    def __init__(
        self,
        hooks: Sequence[CommandHook],
        *,
        permission_of: Callable[[str], str] | None = None,
    ) -> None:
        self.hooks = tuple(hooks)
        self._permission_of = permission_of

    async def before_call(self, call: ToolRequest) -> HookDecision:
        """Run the matching ``preToolUse`` hooks (see the module docstring)."""
        asked: str | None = None
        arguments = call.arguments
        for hook in self._matching("preToolUse", call.name):
            payload = self._payload(hook, call.refined(arguments=arguments))
            try:
                status, out, err = await _run(hook, payload)
                if status == 2:
                    return HookDecision.deny(err or f"the hook {_show(hook)} denied the call")
                answer = _object(out)
                decision = answer.get("decision", "allow")
                reason = answer.get("reason", "")
                if decision not in ("allow", "deny", "ask") or not isinstance(reason, str):
                    raise _HookFailed(f"it answered {out[:200]!r}")
                if decision == "deny":
                    return HookDecision.deny(reason or f"the hook {_show(hook)} denied the call")
                if decision == "ask" and asked is None:
                    asked = reason or f"the hook {_show(hook)} asks for an approval"
                rewritten = answer.get("arguments")
                if rewritten is not None:
                    if not isinstance(rewritten, dict):
                        raise _HookFailed(f"its arguments are not an object: {rewritten!r}")
                    arguments = rewritten
            except _HookFailed as failure:
                logger.warning("preToolUse hook %s failed: %s", _show(hook), failure)
                if hook.on_error == "deny":
                    return HookDecision.deny(
                        f"the preToolUse hook {_show(hook)} failed ({failure}), so the call "
                        f"of {call.name!r} is refused"
                    )
        if asked is not None:
            return HookDecision.ask(asked)
        if arguments is not call.arguments and isinstance(arguments, Mapping):
            return HookDecision.allow(arguments)
        return HookDecision.allow()

    async def after_call(self, call: ToolRequest, result: ToolResult) -> ToolResult:
        """Run the matching ``postToolUse`` hooks (see the module docstring)."""
        for hook in self._matching("postToolUse", call.name):
            payload = self._payload(hook, call, result)
            try:
                status, out, err = await _run(hook, payload)
                if status == 2:
                    return ToolResult.from_exception(
                        NotAllowedError(
                            err or f"the hook {_show(hook)} withheld the result",
                            details={"name": call.name},
                        )
                    )
                answer = _object(out)
                if "content" in answer:
                    try:
                        content = _CONTENT.validate_python(answer["content"])
                    except ValidationError as error:
                        raise _HookFailed(f"its content is not MCP content: {error}") from None
                    result = dataclasses.replace(result, content=tuple(content))
            except _HookFailed as failure:
                logger.warning("postToolUse hook %s failed: %s", _show(hook), failure)
                if hook.on_error == "deny":
                    return ToolResult.from_exception(
                        NotAllowedError(
                            f"the postToolUse hook {_show(hook)} failed ({failure}), so the "
                            f"result of {call.name!r} is withheld",
                            details={"name": call.name},
                        )
                    )
        return result

    def _matching(self, event: str, tool: str) -> list[CommandHook]:
        return [hook for hook in self.hooks if hook.event == event and hook.matches(tool)]

    def _payload(
        self, hook: CommandHook, call: ToolRequest, result: ToolResult | None = None
    ) -> dict[str, Any]:
        context = call.session_context
        arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
        permission = self._permission_of(call.name) if self._permission_of is not None else None
        payload: dict[str, Any] = {
            "event": hook.event,
            "hook_event_name": hook.event[0].upper() + hook.event[1:],
            "tool": call.name,
            "tool_name": call.name,
            "arguments": dict(arguments),
            "tool_input": dict(arguments),
            "session": None if context is None else context.session_id,
            "session_id": None if context is None else context.session_id,
            "principal": None if context is None else context.trusted.get(PRINCIPAL_KEY),
            "permission": permission,
            "permission_mode": None if context is None else context.permission_mode,
            "tool_call_id": call.tool_call_id,
            "tool_use_id": call.tool_call_id,
        }
        if result is not None:
            shown = {
                "content": [dataclasses.asdict(block) for block in result.content],
                "isError": result.is_error,
                "structuredContent": result.structured,
            }
            payload["result"] = payload["tool_response"] = shown
        return payload


async def _run(hook: CommandHook, payload: Mapping[str, Any]) -> tuple[int, str, str]:
    """Run ``hook`` with ``payload`` on stdin: its exit status, stdout and stderr (stripped)."""
    data = json.dumps(payload, ensure_ascii=False, default=str).encode()
    with anyio.move_on_after(hook.timeout_s) as scope:
        try:
            done = await anyio.run_process(list(hook.command), input=data, check=False)
        except OSError as error:
            raise _HookFailed(f"it could not start: {error.strerror or error}") from None
    if scope.cancelled_caught:
        raise _HookFailed(f"it did not answer within {hook.timeout_s:g} s")
    if done.returncode not in (0, 2):
        raise _HookFailed(f"it exited with status {done.returncode}: {_text(done.stderr)[:500]}")
    if len(done.stdout) > _MAX_OUTPUT_BYTES:
        raise _HookFailed(f"its answer is longer than {_MAX_OUTPUT_BYTES} bytes")
    return done.returncode, _text(done.stdout), _text(done.stderr)


def _object(out: str) -> dict[str, Any]:
    if not out:
        return {}
    try:
        answer = json.loads(out)
    except json.JSONDecodeError:
        raise _HookFailed(f"its answer is not JSON: {out[:200]!r}") from None
    if not isinstance(answer, dict):
        raise _HookFailed(f"its answer is not a JSON object: {out[:200]!r}")
    return answer


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").strip()


def _show(hook: CommandHook) -> str:
    return " ".join(hook.command)[:120]
