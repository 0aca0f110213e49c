"""``sagents run-script FILE``: run a script through run_script from the command line
(docs/cli_run_script.md).

``sagents run-script FILE [--config FILE] [--tools a,b] [--mode ask|auto|read-only]
[--description TEXT] [--workspace DIR] [--json]``

On a terminal, a live progress bar goes to stderr; at the end, the model-facing text goes to
stdout. With ``--json``, stdout carries exactly one JSON object and nothing else, in every case
(see :data:`~sagents.cli._script_host.CliStatus` for ``status``). The exit code is 0 only when the
script ended normally; 2 when the command line or the config is wrong; 1 otherwise. Logs go to
stderr only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from sagents.audit._store import SqliteAuditStore
from sagents.cli._logs import setup_logging
from sagents.cli._rich import stderr_console
from sagents.cli._script_host import (
    CliStatus,
    LiveProgress,
    NoTerminalApprover,
    choose_approver,
    failure_object,
    run_script_code,
)
from sagents.cli._workspace import prepare_workspace
from sagents.config._loader import SagentsConfig, load_config
from sagents.core._permissions import PermissionMode, parse_permission_mode
from sagents.errors import ConfigError, SagentsError

__all__ = ["exit_code_of", "run_script", "setup_logging"]

_USAGE_EXIT = 2


def exit_code_of(status: str) -> int:
    """0 for ``ok``; 2 for ``config_error`` and ``usage_error``; 1 otherwise."""
    if status == "ok":
        return 0
    return _USAGE_EXIT if status in ("config_error", "usage_error") else 1


def _emit(result: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(str(result["output"]).rstrip("\n") + "\n")
        if result.get("hint"):
            sys.stderr.write(f"hint: {result['hint']}\n")
    sys.stdout.flush()


def _prepare(
    file: Path | None, config: Path | None, mode: str, workspace: Path | None
) -> tuple[str, SagentsConfig, PermissionMode, Path] | dict[str, Any]:
    status: CliStatus = "usage_error"
    try:
        chosen_mode = parse_permission_mode(mode)
    except ValueError as error:
        return failure_object(status, str(error))
    if file is None:
        return failure_object(status, "missing the script FILE argument")
    try:
        code = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return failure_object(status, f"cannot read the script {str(file)!r}: {error}")
    try:
        loaded = load_config(config) if config is not None else SagentsConfig()
    except ConfigError as error:
        return failure_object("config_error", str(error), hint=error.hint)
    try:
        ws = prepare_workspace(workspace or Path.cwd(), command="sagents run-script")
    except ConfigError as error:
        return failure_object(status, str(error), hint=error.hint)
    return code, loaded, chosen_mode, ws


def run_script(
    file: Annotated[
        Path | None, typer.Argument(help="The Python script to run.", show_default=False)
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="mcpServers JSON file with sagents settings.")
    ] = None,
    tools: Annotated[
        str,
        typer.Option("--tools", help="Comma-separated tools the script declares (write tools)."),
    ] = "",
    mode: Annotated[str, typer.Option("--mode", help="ask, auto or read-only.")] = "ask",
    description: Annotated[
        str, typer.Option("--description", help="What the script does (approvals, audit).")
    ] = "",
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Workspace directory (default: the current one)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON object on stdout.")
    ] = False,
) -> None:
    """Run a script through run_script (sandboxed, tools of the config's MCP servers)."""
    setup_logging()
    prepared = _prepare(file, config, mode, workspace)
    if isinstance(prepared, dict):
        _emit(prepared, as_json=as_json)
        raise typer.Exit(exit_code_of(prepared["status"]))
    code, loaded, chosen_mode, ws = prepared
    interactive = sys.stdin.isatty() and stderr_console().is_terminal
    approver = choose_approver(chosen_mode, interactive=interactive)
    names = tuple(name.strip() for name in tools.split(",") if name.strip())

    async def main() -> dict[str, Any]:
        with LiveProgress() as live:
            result = await run_script_code(
                code=code,
                config=loaded,
                workspace=ws,
                tools=names,
                description=description,
                mode=chosen_mode,
                approver=approver,
                audit=SqliteAuditStore(),
                on_progress=live.update,
            )
        out = result.to_dict()
        out["script_id"] = out["script_id"] or None  # no run (sandbox_error)
        if isinstance(approver, NoTerminalApprover) and approver.asked:
            out["hint"] = (
                f"--mode ask needs a terminal to approve {', '.join(approver.asked)}; "
                "use --mode auto to allow the listed write tools without asking"
            )
        return out

    try:
        out = anyio.run(main)
    except KeyboardInterrupt:
        out = failure_object(
            "cancelled", "interrupted (Ctrl-C): the script's processes were killed"
        )
    except SagentsError as error:  # a server name the registry refuses, and the like
        out = failure_object("config_error", str(error), hint=error.hint)
    _emit(out, as_json=as_json)
    raise typer.Exit(exit_code_of(out["status"]))
