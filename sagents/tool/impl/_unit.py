"""``BuiltinTool``: everything about one built-in tool in one value (docs/architecture.md,
"Adding a built-in tool").

A built-in tool is declared once, in its module under ``sagents/tool/impl/_tools/``: its
name, what the model sees (description and input schema, written out or read from a typed
function through the same builder as ``@tool``), its permission class and hints, whether it
needs the session's sandbox, where it is offered, and the coroutine that runs it. The registry
(``BUILTINS`` in ``_builtin.py``) is a list of these; nothing else names a built-in tool.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sagents.core._permissions import PermissionClass, ToolAnnotations
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.tool._handler import ToolCall
from sagents.tool._local_tool import build_local_tool

if TYPE_CHECKING:
    from sagents.tool.impl._builtin import BuiltinTools

__all__ = ["BuiltinTool", "Run", "object_schema"]

Run = Callable[["BuiltinTools", dict[str, Any], ToolCall], Awaitable[ToolResult]]
"""Runs one call: the tools' shared state (sandboxes, stores, settings), the validated
arguments, the call."""


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A closed JSON Schema object (no properties beyond ``properties``)."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


@dataclass(frozen=True, kw_only=True)
class BuiltinTool:
    """One built-in tool.

    Attributes:
        name: The registered name.
        description: What the model reads.
        input_schema: JSON Schema of the arguments (the ``ToolManager`` validates them before
            ``run``).
        run: Executes a call (:data:`Run`).
        permission: The permission class; ``"shell"`` follows the host's ``shell_permission``
            (``write`` by default, ``destructive`` for an unisolated sandbox).
        idempotent: The ``idempotentHint`` (calling again with the same arguments changes
            nothing more).
        open_world: The ``openWorldHint`` (it reaches outside the host, such as the web).
        needs_sandbox: It runs on the session's sandbox (``sagents chat`` has none, so it
            offers only the tools without this).
        default: Registered when no names are given (the shell and file tools).
        not_served: Why ``sagents serve`` cannot offer it, or None when it can.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: Run
    permission: PermissionClass | Literal["shell"] = "write"
    idempotent: bool = False
    open_world: bool = False
    needs_sandbox: bool = True
    default: bool = False
    not_served: str | None = None

    @classmethod
    def from_function(
        cls,
        func: Callable[..., str | Awaitable[str]],
        *,
        permission: PermissionClass = "read_only",
        **facts: Any,
    ) -> BuiltinTool:
        """A tool that is one typed function returning text: its name, description and input
        schema come from ``func``'s name, signature and docstring, built as ``@tool`` builds
        them (without adding it to the process's discovered tools). A ``ValueError`` it raises
        becomes an ``invalid_arguments`` result."""
        spec = build_local_tool(func, permission=permission).spec

        async def run(tools: BuiltinTools, arguments: dict[str, Any], call: ToolCall) -> ToolResult:
            text = func(**arguments)
            return ToolResult.from_text(await text if inspect.isawaitable(text) else text)

        return cls(
            name=spec.name,
            description=spec.description or "",
            input_schema=spec.input_schema,
            run=run,
            permission=permission,
            **facts,
        )

    def spec(self, shell_permission: PermissionClass) -> ToolSpec:
        """The :class:`ToolSpec`, with ``shell_permission`` for a tool that follows it."""
        permission = shell_permission if self.permission == "shell" else self.permission
        read_only = permission == "read_only"
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=dict(self.input_schema),
            annotations=ToolAnnotations(
                read_only_hint=read_only,
                destructive_hint=permission == "destructive",
                idempotent_hint=self.idempotent,
                open_world_hint=self.open_world,
            ),
            permission=permission,
            source=ToolSource(kind="builtin"),
        )
