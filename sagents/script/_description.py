"""run_script as a tool: when to offer it, its input schema, its per-session description
(docs/run_script.md).

The description is generated per session from the tools a script could call, so the model sees
when to use run_script and when not, the helper API with return shapes, the limits, the
permission rules, that only printed output comes back, and each callable tool in one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sagents.core._limits import ScriptLimits
from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSource, ToolSpec
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME, offered_specs
from sagents.tool._approval import MAX_DESCRIPTION_CHARS

__all__ = [
    "RUN_SCRIPT_INPUT_SCHEMA",
    "run_script_description",
    "run_script_spec",
    "should_offer_run_script",
]

RUN_SCRIPT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "The Python 3 script. Import the helper with "
            "`from agent_tools import call, call_many, call_raw, progress, ToolError`.",
        },
        "tools": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Write tools the script will call (read-only tools need not be "
            "listed; omit it when there are none). Never list destructive or long-task-only "
            "tools.",
        },
        "description": {
            "type": "string",
            "description": "What the script does, in one sentence (shown to the user).",
            "maxLength": MAX_DESCRIPTION_CHARS,
        },
    },
    "required": ["code", "description"],
    "additionalProperties": False,
}

_LABELS = {
    "read_only": "read-only",
    "write": "write: list it in `tools`",
    "destructive": "destructive: NOT callable from scripts, call it directly",
    "long_task_only": "long task: NOT callable from scripts, call it directly",
}


def should_offer_run_script(specs: Iterable[ToolSpec]) -> bool:
    """True when the session has at least one third-party (MCP) tool a script could call."""
    return any(
        spec.source.kind == "mcp" and spec.permission in ("read_only", "write") for spec in specs
    )


def run_script_description(
    specs: Iterable[ToolSpec],
    *,
    mode: PermissionMode,
    limits: ScriptLimits | None = None,
    list_tools: bool = True,
) -> str:
    """The description of run_script for one session.

    Args:
        specs: Every tool of the session.
        mode: The session's permission mode (decides whether write tools are offered).
        limits: The run limits to state.
        list_tools: One line per callable tool (the default); False says how many there are
            and that the script's ``tools()`` lists them, so that the description stays short
            and the same however many tools the session has (the agent loop's tool
            suggestion sends only a few schemas per turn).

    Returns:
        Plain text (Markdown-ish), a few hundred tokens plus one line per tool (without
        ``list_tools``, a few hundred tokens).
    """
    limits = limits or ScriptLimits()
    offered = offered_specs(specs, mode)
    lines = [
        "Run a Python script that calls the tools below many times in one step; only what the "
        "script prints comes back to you.",
        "",
        "Use it when a job needs many tool calls with logic between them (loops, filtering, "
        "aggregation, writing files): e.g. the status of 500 devices, then a summary. Do not "
        "use it for one or two calls, when you must read a result whole, or when the user "
        "has to be asked anything midway.",
        "",
        "In the script:",
        "  from agent_tools import call, call_many, call_raw, progress, tools, describe, ToolError",
        "  call(tool, args) -> the structured result (dict), else the text (parsed as JSON when "
        "it is JSON); raises ToolError(tool, code, message) on a tool error or a refusal.",
        "  call_many(tool, args_list, return_errors=False) -> list of results in input order, "
        "run in parallel; raises the first ToolError (with return_errors=True a failed slot "
        "holds its ToolError instead).",
        "  call_raw(tool, args) -> {'text', 'structured', 'is_error'}; does not raise on a tool "
        "error.",
        "  progress(done, total, message) shows live progress to the user.",
        "  tools() lists callable tools; describe(name) gives one tool's input_schema.",
        "",
        f"Limits: {limits.max_calls} tool calls per script, {limits.max_concurrency} at once, "
        f"{limits.timeout_s / 60:g} minutes, {limits.max_output_bytes // (1024 * 1024)} MiB of "
        f"output. You see the first and last {limits.max_model_chars // 2:,} characters of "
        "the output; print a summary, not raw results. The current directory is the "
        "workspace; there is no network.",
        "",
        "Permissions: read-only tools can be called freely. Write tools must be listed in "
        "`tools`"
        + (" and the user approves them once before the run" if mode == "ask" else "")
        + ". Destructive and long-task-only tools cannot be called from scripts: call them "
        "directly. Calling an unlisted write tool raises ToolError.",
        "",
        "Tools callable from scripts:",
    ]
    if not list_tools:
        lines.append(
            f"- {len(offered)} tools of this session: in the script, tools() lists them with "
            "their permission class and describe(name) gives one's input_schema. The tools "
            "you are offered directly are among them (destructive and long-task-only ones "
            "excepted)."
        )
        return "\n".join(lines)
    for spec in offered:
        label = _LABELS.get(spec.permission, spec.permission)
        summary = f": {spec.summary}" if spec.summary else ""
        lines.append(f"- {spec.name} ({label}){summary}")
    if not offered:
        lines.append("- (none)")
    return "\n".join(lines)


def run_script_spec(
    specs: Iterable[ToolSpec],
    *,
    mode: PermissionMode,
    limits: ScriptLimits | None = None,
    list_tools: bool = True,
) -> ToolSpec:
    """run_script's :class:`ToolSpec` for one session (a built-in ``write`` tool).

    Its permission class is ``write``: what it may do is decided per call by the pre-run
    check and the approval, not by the class. ``list_tools``: see
    :func:`run_script_description`.
    """
    return ToolSpec(
        name=RUN_SCRIPT_TOOL_NAME,
        description=run_script_description(specs, mode=mode, limits=limits, list_tools=list_tools),
        input_schema=RUN_SCRIPT_INPUT_SCHEMA,
        permission="write",
        source=ToolSource(kind="builtin"),
    )
