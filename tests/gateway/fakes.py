"""A fake tool provider and fake progress events for the gateway tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from sagents.core._permissions import PermissionClass, ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.gateway._questions import ElicitationQuestioner
from sagents.gateway._seams import MemoryProgressSource
from sagents.progress import default_hub
from sagents.progress._binding import LazyToolCall
from sagents.tool import ToolRequest
from sagents.tool._context import SessionContext
from sagents.tool._spec_provider import SpecProvider


@dataclass(frozen=True, kw_only=True)
class FakeToolProgress:
    tool_call_id: str
    text: str
    stream: str = "stdout"
    closed: bool = False
    ts: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FakeScriptProgress:
    calls: int
    failures: int = 0
    done: float | None = None
    total: float | None = None
    message: str | None = None
    elapsed_s: float = 0.0
    status: str = "running"


def _spec(
    name: str,
    permission: PermissionClass,
    *,
    server: str | None = "fleet",
    annotations: ToolAnnotations | None = None,
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"The {name} tool.",
        input_schema={"type": "object", "properties": {"sn": {"type": "string"}}},
        permission=permission,
        annotations=annotations or ToolAnnotations(read_only_hint=permission == "read_only"),
        source=ToolSource(kind="mcp", server=server, original_name=name.split("__")[-1])
        if server
        else ToolSource(kind="local"),
    )


@dataclass
class FakeProvider(SpecProvider):
    """Tools: fleet__status (read), fleet__configure (write), fleet__reboot (destructive),
    fleet__hidden (disabled), fleet__slow (read, waits for ``release``), fleet__progress (read,
    emits progress then returns), other__ping (read, another server), local_echo (local write)."""

    progress: MemoryProgressSource = field(default_factory=MemoryProgressSource)
    calls: list[tuple[str, dict[str, Any], SessionContext | None]] = field(default_factory=list)
    started: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    script_events: list[object] = field(default_factory=list)

    def list_specs(self) -> list[ToolSpec]:
        return [
            _spec("fleet__status", "read_only"),
            _spec("fleet__configure", "write"),
            _spec("fleet__reboot", "destructive"),
            _spec("fleet__hidden", "disabled"),
            _spec("fleet__slow", "read_only"),
            _spec("fleet__progress", "read_only"),
            _spec("other__ping", "read_only", server="other"),
            _spec("local_echo", "write", server=None),
        ]

    async def call(self, request: ToolRequest) -> ToolResult:
        name, args, session_context = request.name, request.arguments, request.session_context
        tool_call_id = request.tool_call_id
        arguments = dict(args) if isinstance(args, Mapping) else {}
        self.calls.append((name, arguments, session_context))
        if name == "fleet__slow":
            self.started.set()
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
            return ToolResult.from_text("slow done")
        if name == "fleet__progress":
            assert session_context is not None
            assert tool_call_id is not None
            sid = session_context.session_id
            for event in self.script_events:
                await self.progress.emit(sid, tool_call_id, event)
            # Give the forwarder a chance to run before the result (it must still send
            # whatever is left before answering).
            await anyio.lowlevel.checkpoint()
            return ToolResult.from_structured({"ok": True})
        return ToolResult.from_structured({"tool": name, "arguments": arguments})


def in_a_call_asking(asker: object) -> LazyToolCall:
    """The binding of a gateway call whose client is asked through ``asker`` (a
    :class:`~sagents.gateway._approval.ClientAsker`, or a fake of one): what the call pipeline
    binds around each call, its context carrying the asker as its questioner. Use as ``with``."""
    questioner = ElicitationQuestioner(asker)  # type: ignore[arg-type]  # a fake asker
    context = SessionContext(session_id="s1", questioner=questioner)
    return LazyToolCall(default_hub(), context.session_id, "call_1", context)
