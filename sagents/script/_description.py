"""run_script as a tool: when to offer it, its input schema, its per-session description
(docs/run_script.md).

The description is generated per session from the tools a script could call, so the model sees
when to use run_script and when not, the helper API with return shapes, the limits, the
permission rules, that only printed output comes back, and the callable tools in their
condensed form: the one-line signatures of their typed stubs (docs/run_script.md, "Typed
stubs"), grouped by stubs module, within a token budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sagents.core._limits import ScriptLimits
from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSource, ToolSpec
from sagents.core._tokens import default_token_counter
from sagents.script._policy import RUN_SCRIPT_TOOL_NAME, offered_specs
from sagents.script._stubs import STUBBED_PERMISSIONS, stub_catalog
from sagents.tool._approval import MAX_DESCRIPTION_CHARS

__all__ = [
    "DEFAULT_TOOL_TOKENS",
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

DEFAULT_TOOL_TOKENS = 2000
"""The budget of the description's tool signatures, in tokens (tiktoken ``cl100k_base``):
past it the description says how many more tools there are."""


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
    first: Sequence[str] = (),
    tool_tokens: int = DEFAULT_TOOL_TOKENS,
) -> str:
    """The description of run_script for one session.

    Args:
        specs: Every tool of the session.
        mode: The session's permission mode (decides whether write tools are offered).
        limits: The run limits to state.
        list_tools: The callable tools' signatures (the default); False says how many there
            are and that the script's ``tools()`` lists them, so that the description stays
            short and the same however many tools the session has (the agent loop's tool
            suggestion sends only a few schemas per turn).
        first: Tool names to list first (the most relevant ones); the others follow in the
            session's order.
        tool_tokens: The budget of the signatures, in tokens; the tools past it are counted.

    Returns:
        Plain text (Markdown-ish): a few hundred tokens plus at most ``tool_tokens`` of
        signatures.
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
        "  from agent_tools.stubs import <server>  # typed functions of the tools below: "
        "fleet.get_device_status(sn='SN0001'); help(fleet.get_device_status) describes one",
        "  from agent_tools import call, call_many, call_raw, progress, tools, describe, ToolError",
        "  call(tool, args) -> the structured result (dict), else the text (parsed as JSON when "
        "it is JSON); raises ToolError(tool, code, message) on a tool error or a refusal. A "
        "stub function is call() underneath.",
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
        "`tools`, by their full name"
        + (" and the user approves them once before the run" if mode == "ask" else "")
        + ". Destructive and long-task-only tools cannot be called from scripts: call them "
        "directly. Calling an unlisted write tool raises ToolError.",
        "",
        "Tools callable from scripts:",
    ]
    callable_ = [spec for spec in offered if spec.permission in STUBBED_PERMISSIONS]
    if not list_tools:
        lines.append(
            f"- {len(offered)} tools of this session: in the script, tools() lists them with "
            "their permission class and describe(name) gives one's input_schema. The tools "
            "you are offered directly are among them (destructive and long-task-only ones "
            "excepted); a tool `<server>__<name>` is `<name>` in `agent_tools.stubs.<server>`."
        )
        return "\n".join(lines)
    lines += _signatures(callable_, first, tool_tokens) if callable_ else ["- (none)"]
    direct = [spec.name for spec in offered if spec.permission not in STUBBED_PERMISSIONS]
    if direct:
        lines.append("Not callable from scripts (call them directly): " + ", ".join(direct))
    return "\n".join(lines)


def _signatures(specs: list[ToolSpec], first: Sequence[str], budget: int) -> list[str]:
    """The condensed form: per stubs module, one signature per tool (``= ...``: optional), a
    write tool marked with the name to list in ``tools``; the tools in ``first`` order, then
    the session's, as many as ``budget`` tokens hold."""
    catalog = stub_catalog(specs)
    located = catalog.locate()
    rank = {name: index for index, name in enumerate(dict.fromkeys(first))}
    ordered = sorted(specs, key=lambda spec: rank.get(spec.name, len(rank)))
    counter = default_token_counter()
    chosen: dict[str, list[str]] = {}
    used = 0
    shown = 0
    for spec in ordered:
        module, function = located[spec.name]
        line = f"  {catalog.signature(module, function)}"
        if spec.permission == "write":
            line += f"  [write: {spec.name}]"
        elif spec.name not in (f"{module}__{function}", function):
            line += f"  [name: {spec.name}]"
        cost = counter.count(line) + 1
        if used + cost > budget:
            break
        used += cost
        shown += 1
        chosen.setdefault(module, []).append(line)
    lines = [
        "(`= ...`: optional; `[write: name]`: list that name in `tools` to call it; a tool "
        "`<module>__<function>` unless `[name: ...]` says otherwise.)",
    ]
    for module, module_lines in chosen.items():
        lines += [f"{module}:", *module_lines]
    if shown < len(specs):
        lines.append(
            f"... and {len(specs) - shown} more tools: tools() lists them all, and "
            "help(<module>) in a script shows a stubs module's functions."
        )
    return lines


def run_script_spec(
    specs: Iterable[ToolSpec],
    *,
    mode: PermissionMode,
    limits: ScriptLimits | None = None,
    list_tools: bool = True,
    first: Sequence[str] = (),
) -> ToolSpec:
    """run_script's :class:`ToolSpec` for one session (a built-in ``write`` tool).

    Its permission class is ``write``: what it may do is decided per call by the pre-run
    check and the approval, not by the class. ``list_tools`` and ``first``: see
    :func:`run_script_description`.
    """
    return ToolSpec(
        name=RUN_SCRIPT_TOOL_NAME,
        description=run_script_description(
            specs, mode=mode, limits=limits, list_tools=list_tools, first=first
        ),
        input_schema=RUN_SCRIPT_INPUT_SCHEMA,
        permission="write",
        source=ToolSource(kind="builtin"),
    )
