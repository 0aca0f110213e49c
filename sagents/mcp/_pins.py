"""Definition pinning of upstream tools ("rug pulls"; docs/gateway.md, "Pinned definitions").

Each upstream tool's definition (its name, title, description, input and output schema and
annotations) is pinned by digest, per server, the first time it is seen
(:class:`~sagents.store.PinStore`). When a server later offers a changed definition, the tool is
held until an operator accepts the change: by the server's ``onDefinitionChange``

- ``ask`` (the default): its permission class becomes ``destructive``, so every call is asked
  about, in every mode, and no script may call it;
- ``disable``: it becomes ``disabled`` (not offered at all);
- ``accept``: the change is accepted and pinned at once, except one that sets ``readOnlyHint``
  on a tool that was not read-only: that one is held as with ``ask``, so that a tool never gains
  ``read_only`` without an operator's acceptance.

A store out of reach holds every tool of the listing as with ``ask`` (their definitions could
not be checked), with a warning; the next listing checks again.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
from collections.abc import Sequence
from typing import Any, Literal

from sagents.core._spec import ToolSpec
from sagents.errors import StoreError
from sagents.mcp._convert import TOOL_NAME_SEPARATOR
from sagents.store._pins import ToolPin
from sagents.store._protocols import PinStore

__all__ = [
    "CHANGED_META",
    "OnDefinitionChange",
    "definition_diff",
    "definition_text",
    "gains_read_only",
    "review_definitions",
    "tool_definition",
]

logger = logging.getLogger(__name__)

OnDefinitionChange = Literal["ask", "disable", "accept"]
"""What a changed definition does to its tool until accepted (see the module)."""

CHANGED_META = "sagents/definitionChanged"
"""The ``meta`` key of a held tool's spec: the digest of the definition that was accepted."""


def tool_definition(spec: ToolSpec) -> dict[str, Any]:
    """What is pinned of an upstream tool: its name on the server, title, description, input
    and output schema and the annotations it gave (as MCP names them)."""
    given = dataclasses.asdict(spec.annotations)
    names = {
        "title": "title",
        "read_only_hint": "readOnlyHint",
        "destructive_hint": "destructiveHint",
        "idempotent_hint": "idempotentHint",
        "open_world_hint": "openWorldHint",
    }
    return {
        "name": spec.source.original_name or spec.name,
        "title": spec.meta.get("title"),
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "outputSchema": spec.output_schema,
        "annotations": {names[k]: v for k, v in given.items() if v is not None},
    }


def definition_text(spec: ToolSpec) -> str:
    """The canonical JSON text of :func:`tool_definition` (sorted keys, no spaces): what its
    digest is taken of."""
    return json.dumps(
        tool_definition(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def gains_read_only(pin: ToolPin) -> bool:
    """Whether the offered change sets ``readOnlyHint`` on a tool whose accepted definition
    did not."""
    if pin.offered is None:
        return False
    before = json.loads(pin.definition).get("annotations", {}).get("readOnlyHint")
    after = json.loads(pin.offered).get("annotations", {}).get("readOnlyHint")
    return after is True and before is not True


def _held(spec: ToolSpec, how: OnDefinitionChange, accepted: str | None) -> ToolSpec:
    if spec.permission == "disabled":
        return spec
    return dataclasses.replace(
        spec,
        permission="disabled" if how == "disable" else "destructive",
        meta={**spec.meta, CHANGED_META: accepted},
    )


async def review_definitions(
    server: str,
    specs: Sequence[ToolSpec],
    pins: PinStore,
    on_change: OnDefinitionChange = "ask",
) -> tuple[ToolSpec, ...]:
    """Check a server's listing against its pins; returns the specs to register.

    Args:
        server: The server's name.
        specs: Its tools, as listed now.
        pins: Where definitions are pinned.
        on_change: The server's ``onDefinitionChange``.

    Returns:
        ``specs`` in order, each unchanged, or held (see the module) when its definition is
        not the accepted one.
    """
    by_tool = {spec.source.original_name or spec.name: spec for spec in specs}
    try:
        seen = await pins.observe(server, {t: definition_text(s) for t, s in by_tool.items()})
        if on_change == "accept":
            for tool, pin in list(seen.items()):
                if pin.changed and not gains_read_only(pin):
                    for accepted in await pins.accept(server, tool):
                        logger.warning(
                            "MCP server %r changed the definition of tool %r; accepted "
                            "(onDefinitionChange: accept)",
                            server,
                            tool,
                        )
                        seen[tool] = accepted
    except StoreError as error:
        logger.warning(
            "MCP server %r: its tools' definitions cannot be checked against their pins (%s); "
            "every call of its tools is asked about until they can",
            server,
            error,
        )
        return tuple(_held(spec, "ask", None) for spec in specs)
    reviewed: list[ToolSpec] = []
    for tool, spec in by_tool.items():
        pin = seen[tool]
        if not pin.changed:
            reviewed.append(spec)
            continue
        how: OnDefinitionChange = "ask" if on_change == "accept" else on_change
        logger.warning(
            "MCP server %r changed the definition of tool %r since it was accepted: %s until "
            "an operator accepts it (sagents tools --changes; sagents tools --accept %s__%s)",
            server,
            tool,
            "disabled" if how == "disable" else "every call is asked about",
            server,
            tool,
        )
        reviewed.append(_held(spec, how, pin.digest))
    return tuple(reviewed)


def definition_diff(pin: ToolPin) -> str:
    """A unified diff from the accepted definition of ``pin`` to the offered one (each as
    indented JSON, keys sorted); empty when nothing is offered."""
    if pin.offered is None:
        return ""
    before, after = (
        json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
        for text in (pin.definition, pin.offered)
    )
    name = f"{pin.server}{TOOL_NAME_SEPARATOR}{pin.tool}"
    lines = difflib.unified_diff(
        before,
        after,
        fromfile=f"{name} (accepted {pin.digest[:12]})",
        tofile=f"{name} (offered {(pin.offered_digest or '')[:12]})",
        lineterm="",
    )
    return "\n".join(lines)
