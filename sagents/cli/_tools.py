"""``sagents tools`` and ``sagents call``: list the configured tools, call one (docs/cli-tools.md).

Both read the configuration file (docs/configuration.md) given by ``--config``, else the
environment variable ``SAGENTS_CONFIG``, else ``./sagents.json``; start the enabled servers they
need side by side (:func:`sagents.config.tools.build_tool_manager`): ``tools`` every server (or
the one of ``--server``), ``call`` only the server that owns the tool (the ``<server>__``
prefix of its name); do their work and close the servers again.

Exit codes: 0 success; 1 the called tool returned an error result, or the call was refused by
``--mode``; 2 a usage error (a bad or missing configuration file, ``--args`` that is not a JSON
object, an unknown tool or server). Errors go to stderr; stdout carries only what was asked for
(Rich tables on a terminal, plain tab-separated lines when piped, JSON with ``--json``). With
``--json`` an exit-2 error is also printed on stdout as one object, ``{"is_error": true,
"error": {"code", "message"}}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
import typer

from sagents.cli._call_approval import approve_call, read_answer
from sagents.cli._logs import setup_logging
from sagents.cli._rich import stderr_console, stdout_console
from sagents.cli._tool_pins import accept_changes, changed_tools, pin_json
from sagents.cli.terminal_approval import TerminalApprover
from sagents.config import SagentsConfig, load_config
from sagents.config.tools import build_tool_manager
from sagents.core._literal import literal_text, printable
from sagents.core._permissions import parse_permission_mode
from sagents.core._result import ToolResult
from sagents.errors import ConfigError, StoreError, UnknownToolError
from sagents.mcp import ServerStatus
from sagents.mcp._pins import definition_diff
from sagents.tool.tool_manager import ToolManager

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "ConfigOption",
    "call_command",
    "config_path",
    "find_config",
    "only_server",
    "result_to_json",
    "tools_command",
    "tools_listing",
]

CONFIG_ENV = "SAGENTS_CONFIG"
DEFAULT_CONFIG = Path("sagents.json")

T = TypeVar("T")

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"The configuration file. Default: ${CONFIG_ENV}, else ./{DEFAULT_CONFIG}.",
    ),
]
_JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def config_path(given: Path | None) -> Path:
    """The file to read: ``given``, else ``$SAGENTS_CONFIG``, else ``./sagents.json``."""
    return find_config(given) or DEFAULT_CONFIG


def find_config(given: Path | None) -> Path | None:
    """The configuration file, found the same way by ``tools``, ``call`` and ``chat``:
    ``--config``, else ``$SAGENTS_CONFIG`` (either is read even when missing, so that the
    error names it), else ``./sagents.json`` when there is one; None when nothing names a file
    and there is no ``./sagents.json``."""
    if given is not None:
        return given
    from_env = os.environ.get(CONFIG_ENV, "").strip()
    if from_env:
        return Path(from_env)
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


def _fail(message: str, code: str, as_json: bool) -> typer.Exit:
    """Print a usage/config error (stderr; with ``--json`` also one JSON object on stdout).

    The JSON has the shape of a failed result: ``{"is_error": true, "error": {"code",
    "message"}}``, ``code`` one of ``usage_error``, ``config_error``, ``unknown_tool``.
    Returns the exit (code 2) for the caller to raise.
    """
    typer.echo(f"error: {message}", err=True)
    if as_json:
        error = {"code": code, "message": message}
        typer.echo(json.dumps({"is_error": True, "error": error}, ensure_ascii=False))
    return typer.Exit(2)


def _load(given: Path | None, as_json: bool = False) -> SagentsConfig:
    path = config_path(given)
    try:
        return load_config(path)
    except ConfigError as error:
        exit_ = _fail(error.message, "config_error", as_json)
        if given is None and not path.exists():
            typer.echo(f"hint: pass --config FILE or set ${CONFIG_ENV}", err=True)
        raise exit_ from None


def only_server(config: SagentsConfig, server: str) -> SagentsConfig | None:
    """``config`` with its one enabled server ``server``, or None when it has no such server."""
    chosen = tuple(s for s in config.servers if s.name == server)
    return dataclasses.replace(config, servers=chosen) if chosen else None


def _unknown_server(config: SagentsConfig, server: str) -> str:
    names = ", ".join(s.name for s in config.servers) or "none"
    message = f"no enabled server {server!r} in the configuration (enabled servers: {names})"
    if server in config.disabled:
        message = f"server {server!r} is disabled in the configuration"
    return message


def _with_manager(config: SagentsConfig, work: Callable[[ToolManager], Awaitable[T]]) -> T:
    async def main() -> T:
        async with await build_tool_manager(config) as manager:
            return await work(manager)

    return anyio.run(main)


# -- sagents tools -------------------------------------------------------------------------------


def tools_listing(manager: ToolManager) -> dict[str, Any]:
    """The JSON of ``sagents tools --json``.

    Returns:
        ``{"tools": [{"name", "exported_name", "server", "permission", "status",
        "description", "input_schema"}], "servers": [{"name", "state", "transport",
        "protocol_version", "last_error", "tools", "withheld": [{"name", "reason"}]}]}``;
        ``server`` and ``status`` are None for a tool of no MCP server; ``input_schema`` is
        the JSON Schema of the tool's arguments as the tool declares it.
    """
    states = {s.name: _state(s) for s in manager.mcp_server_statuses()}
    exported = {t["function"]["name"]: t["function"] for t in manager.get_openai_tools()}
    by_registered = {manager.resolve_exported_name(n): n for n in exported}
    tools = []
    for spec in manager.list_specs():
        server = spec.source.server
        tools.append(
            {
                "name": spec.name,
                "exported_name": by_registered.get(spec.name),
                "server": server,
                "permission": spec.permission,
                "status": states.get(server) if server else None,
                "description": spec.summary,
                "input_schema": dict(spec.input_schema),
            }
        )
    return {"tools": tools, "servers": [_server_json(s) for s in manager.mcp_server_statuses()]}


def _state(status: ServerStatus) -> str:
    """A server's state as ``sagents tools`` shows it: ``needs_login`` for a server that
    refused the connection for want of a login (docs/oauth.md)."""
    return "needs_login" if status.needs_login else status.state


def _server_json(status: ServerStatus) -> dict[str, Any]:
    return {
        "name": status.name,
        "state": _state(status),
        "transport": status.transport,
        "protocol_version": status.protocol_version,
        "last_error": status.last_error,
        "tools": list(status.tools),
        "withheld": [{"name": w.name, "reason": w.reason} for w in status.withheld],
    }


def tools_command(
    config: ConfigOption = None,
    as_json: _JsonOption = False,
    server: Annotated[
        str | None,
        typer.Option("--server", "-s", help="Start and list only this server's tools."),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            metavar="NAME",
            help="Print the input schema (JSON Schema) of the tool NAME instead of the list.",
        ),
    ] = None,
    changes: Annotated[
        bool,
        typer.Option(
            "--changes",
            help="Show the tools whose definition changed since it was pinned, with a diff "
            "(docs/gateway.md, 'Pinned definitions').",
        ),
    ] = False,
    accept: Annotated[
        str | None,
        typer.Option(
            "--accept",
            metavar="SERVER[__TOOL]",
            help="Accept the changed definitions of a server's tools, or of one tool.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="The store of the pinned definitions, as sagents serve's --store; default: "
            "the configuration's store.url, else the data directory's SQLite files.",
        ),
    ] = None,
) -> None:
    """List every tool with its server, permission class and the server's status."""
    setup_logging(server_failures=False)  # the listing reports each failed server
    loaded = _load(config, as_json)
    if server is not None:
        narrowed = only_server(loaded, server)
        if narrowed is None:
            raise _fail(_unknown_server(loaded, server), "usage_error", as_json)
        loaded = narrowed
    if changes or accept is not None:
        _pins_command(loaded, store, accept, as_json)
        return
    if schema is not None:
        _print_schema(_owner(loaded, schema), schema, as_json)
        return

    async def work(manager: ToolManager) -> dict[str, Any]:
        return tools_listing(manager)

    listing = _with_manager(loaded, work)
    if as_json:
        typer.echo(json.dumps(listing, indent=2, ensure_ascii=False))
        return
    console = stdout_console()
    if console.is_terminal:
        _print_rich(console, listing)
    else:
        _print_plain(listing)


def _pins_command(
    config: SagentsConfig, store: str | None, accept: str | None, as_json: bool
) -> None:
    """``--changes`` or ``--accept``: print the changed tools, or accept changes."""
    try:
        if accept is not None:
            pins = accept_changes(config, store, accept)
        else:
            pins = changed_tools(config, store)
    except (StoreError, ConfigError) as error:
        raise _fail(error.message, error.code, as_json) from None
    except ValueError as error:  # --accept given something else than SERVER[__TOOL]
        raise _fail(f"--accept {accept!r}: {error}", "usage_error", as_json) from None
    if accept is not None and not pins:
        raise _fail(
            f"no changed definition of {accept!r} to accept (sagents tools --changes lists them)",
            "usage_error",
            as_json,
        )
    if as_json:
        key = "accepted" if accept is not None else "changes"
        typer.echo(json.dumps({key: [pin_json(pin) for pin in pins]}, indent=2))
        return
    for pin in pins:
        name = printable(pin_json(pin)["name"], newlines=False)
        if accept is not None:
            typer.echo(f"accepted {name} ({pin.digest[:12]})")
            continue
        typer.echo(f"changed {name}: held until accepted (sagents tools --accept {name})")
        typer.echo(printable(definition_diff(pin)))
    if accept is None and not pins:
        typer.echo("no changed tool definitions")


def _print_schema(config: SagentsConfig, name: str, as_json: bool) -> None:
    """Print the input schema of the tool ``name`` (registered or exported) as JSON."""

    async def work(manager: ToolManager) -> dict[str, Any] | str:
        registered = _registered(manager, name)
        if registered is None:
            return _unknown(manager, name)
        return dict(manager.get_tool_spec(registered).input_schema)

    found = _with_manager(config, work)
    if isinstance(found, str):
        raise _fail(found, "unknown_tool", as_json)
    typer.echo(json.dumps(found, indent=2, ensure_ascii=False))


def _print_rich(console: Console, listing: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="Tools")
    for column in ("tool", "server", "permission", "status", "description"):
        table.add_column(column)
    for tool in listing["tools"]:  # servers' text: shown literally, never as markup
        table.add_row(
            literal_text(tool["name"]),
            literal_text(tool["server"] or "-"),
            tool["permission"],
            tool["status"] or "-",
            literal_text(tool["description"]),
        )
    console.print(table)
    servers = Table(title="Servers")
    for column in ("server", "state", "transport", "tools", "problems"):
        servers.add_column(column)
    for server in listing["servers"]:
        servers.add_row(
            literal_text(server["name"]),
            server["state"],
            literal_text(server["transport"]),
            str(len(server["tools"])),
            literal_text("\n".join(_problems(server))),
        )
    console.print(servers)


def _print_plain(listing: dict[str, Any]) -> None:
    for tool in listing["tools"]:
        fields = (tool["name"], tool["server"] or "-", tool["permission"], tool["status"] or "-")
        typer.echo("\t".join(fields))
    for server in listing["servers"]:
        for problem in _problems(server):  # one line each: a server's error text is literal
            typer.echo(printable(f"# {server['name']}: {problem}", newlines=False))


def _problems(server: dict[str, Any]) -> list[str]:
    problems = []
    if server["state"] != "ready":
        problems.append(f"{server['state']}: {server['last_error'] or 'no error recorded'}")
    problems.extend(f"withheld {w['name']}: {w['reason']}" for w in server["withheld"])
    return problems


# -- sagents call --------------------------------------------------------------------------------


def result_to_json(result: ToolResult) -> dict[str, Any]:
    """A ToolResult as JSON: ``{"content": [...], "structured", "is_error", "error", "meta"}``.

    Content blocks keep their dataclass fields (``type``, ``text``, ``data``, ``mime_type``...).
    """
    value: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(result), default=dict))
    return value


_ARGS_SHOWN_CHARS = 200  # characters of bad --args quoted back in the error


def _read_args(text: str, as_json: bool) -> tuple[str, str]:
    """The JSON text of ``--args`` and where it came from (``--args``, a file, stdin)."""
    if text == "-":
        return sys.stdin.read(), "--args - (stdin)"
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            return path.read_text(encoding="utf-8"), f"--args file {str(path)!r}"
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else str(error)
            message = f"cannot read the --args file {str(path)!r}: {reason}"
            raise _fail(message, "usage_error", as_json) from None
    return text, "--args"


def _parse_args(text: str | None, as_json: bool) -> dict[str, Any]:
    if text is None:
        return {}
    document, source = _read_args(text, as_json)
    try:
        value = json.loads(document)
    except json.JSONDecodeError as error:
        message = (
            f"{source} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        )
        raise _fail(message, "usage_error", as_json) from None
    if not isinstance(value, dict):
        shown = document.strip()
        if len(shown) > _ARGS_SHOWN_CHARS:
            shown = shown[:_ARGS_SHOWN_CHARS] + " …"
        message = f"{source} must be a JSON object, not {type(value).__name__}: {shown}"
        raise _fail(message, "usage_error", as_json)
    return value


def _registered(manager: ToolManager, name: str) -> str | None:
    """The registered name of the tool ``name`` (registered or exported); None: no such tool."""
    if manager.has_tool(name):
        return name
    try:
        return manager.resolve_exported_name(name)
    except UnknownToolError:
        return None


def _unknown(manager: ToolManager, name: str) -> str:
    message = f"unknown tool {name!r}"
    server = name.split("__", 1)[0] if "__" in name else None
    for status in manager.mcp_server_statuses():
        if status.name == server and status.state != "ready":
            return f"{message}: server {server!r} is {status.state}: {status.last_error}"
    names = manager.list_all_tools_name()
    return f"{message}; known tools: {', '.join(names) if names else 'none'}"


def _owner(config: SagentsConfig, name: str) -> SagentsConfig:
    """The config narrowed to the server that owns ``name`` (its ``<server>__`` prefix); the
    whole config when the prefix names no enabled server (an exported or local name)."""
    server, separator, _ = name.partition("__")
    narrowed = only_server(config, server) if separator else None
    return narrowed or config


def call_command(
    name: Annotated[str, typer.Argument(help="The tool's registered or exported name.")],
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            "-a",
            help="The arguments: a JSON object, @FILE to read it from a file, - for stdin.",
        ),
    ] = None,
    config: ConfigOption = None,
    as_json: _JsonOption = False,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", metavar="<seconds>", min=0.001, help="Seconds for the call."),
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="ask (a terminal prompt for write and destructive tools), auto (write tools "
            "run unasked; destructive ones are still asked about) or read-only.",
        ),
    ] = "ask",
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Run a call that would be asked about (a destructive tool, or a write tool "
            "in ask mode) without asking.",
        ),
    ] = False,
) -> None:
    """Call one tool and print its result (exit code 1 when the result is an error)."""
    setup_logging()
    try:
        chosen_mode = parse_permission_mode(mode)
    except ValueError as error:
        raise _fail(str(error), "usage_error", as_json) from None
    arguments = _parse_args(args, as_json)
    loaded = _owner(_load(config, as_json), name)
    interactive = sys.stdin.isatty() and stderr_console().is_terminal
    approver = TerminalApprover(ask=read_answer, caller=None) if interactive else None

    async def work(manager: ToolManager) -> ToolResult | str:
        registered = _registered(manager, name)
        if registered is None:
            return _unknown(manager, name)
        refusal = await approve_call(
            manager.get_tool_spec(registered),
            arguments,
            chosen_mode,
            approver=approver,
            yes=yes,
        )
        if refusal is not None:
            return refusal
        return await manager.run_tool(name, arguments, timeout=timeout)

    outcome = _with_manager(loaded, work)
    if isinstance(outcome, str):
        raise _fail(outcome, "unknown_tool", as_json)
    if as_json:
        typer.echo(json.dumps(result_to_json(outcome), indent=2, ensure_ascii=False))
    else:
        message = outcome.to_tool_message()
        typer.echo(printable(message) if sys.stdout.isatty() else message)  # literal on a tty
    if outcome.is_error:
        raise typer.Exit(1)
