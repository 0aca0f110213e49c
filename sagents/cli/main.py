"""Entry point of the ``sagents`` command, on Typer.

Subcommands are added by the modules of this package; each prints through Rich to stdout only what
its user asked for, and logs go to stderr.

Start-up cost: the subcommand modules import the MCP SDK, the gateway, the sandbox and the config
loader, about two seconds together. So the root group knows each subcommand by name and one-line
help only (:data:`LAZY_COMMANDS`), and imports a subcommand's module when that subcommand is
resolved, to run it or to print its own ``--help``. ``sagents --help`` imports none of them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from sagents import __version__

__all__ = ["app", "main"]


@dataclass(frozen=True, kw_only=True)
class LazyCommand:
    """A subcommand whose module is imported only when the subcommand is used.

    Attributes:
        module: The module that defines it (``sagents.cli._serve``).
        attribute: The command's function, or a ``typer.Typer`` for a group of subcommands.
        short_help: The line shown by ``sagents --help``; the same as the first line of the
            function's docstring (or the group's help), which a test checks.
    """

    module: str
    attribute: str
    short_help: str


LAZY_COMMANDS: dict[str, LazyCommand] = {
    "serve": LazyCommand(
        module="sagents.cli._serve",
        attribute="serve",
        short_help="Run the MCP gateway (stdio by default; --transport http for streamable HTTP).",
    ),
    "console": LazyCommand(
        module="sagents.cli._console",
        attribute="console",
        short_help="Browse the audit and the records of past runs in a web console.",
    ),
    "run-script": LazyCommand(
        module="sagents.cli._run_script",
        attribute="run_script",
        short_help=(
            "Run a script through run_script (sandboxed, tools of the config's MCP servers)."
        ),
    ),
    "demo": LazyCommand(
        module="sagents.cli._demo",
        attribute="demo",
        short_help=(
            "Run the bundled fleet job through run_script: 500 devices, one script, one summary."
        ),
    ),
    "tools": LazyCommand(
        module="sagents.cli._tools",
        attribute="tools_command",
        short_help="List every tool with its server, permission class and the server's status.",
    ),
    "call": LazyCommand(
        module="sagents.cli._tools",
        attribute="call_command",
        short_help=(
            "Call one tool and print its result (exit code 1 when the result is an error)."
        ),
    ),
    "chat": LazyCommand(
        module="sagents.cli._chat",
        attribute="chat",
        short_help="Chat with an agent that uses the configured tools and skills.",
    ),
    "auth": LazyCommand(
        module="sagents.cli._auth",
        attribute="app",
        short_help="Log the gateway in to upstream servers that need OAuth, per principal.",
    ),
    "skills": LazyCommand(
        module="sagents.cli._skills",
        attribute="app",
        short_help="List, show and validate Agent Skills directories.",
    ),
}
"""The subcommands imported on use, in the order ``sagents --help`` lists them."""


def load_command(name: str) -> typer.core.TyperCommand | typer.core.TyperGroup:
    """Import the subcommand ``name`` of :data:`LAZY_COMMANDS` and build its click command.

    Raises:
        KeyError: for a name that is not in :data:`LAZY_COMMANDS`.
    """
    entry = LAZY_COMMANDS[name]
    target: Any = getattr(importlib.import_module(entry.module), entry.attribute)
    host = typer.Typer(add_completion=False, rich_markup_mode=None)
    if isinstance(target, typer.Typer):
        host.add_typer(target, name=name)
    else:
        host.command(name)(target)
    command = typer.main.get_group(host).commands[name]
    assert isinstance(command, typer.core.TyperCommand | typer.core.TyperGroup)
    return command


class WholeHelpGroup(typer.core.TyperGroup):
    """A command group whose ``--help`` lists each subcommand with its whole help line,
    wrapped to the width (click cuts it at about 45 characters, with ``...``)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [
            (name, command.get_short_help_str(limit=1000))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class _LazyGroup(WholeHelpGroup):
    """The root group: :data:`LAZY_COMMANDS` are stand-ins until resolved."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._stand_ins: dict[str, typer.core.TyperCommand] = {}
        for name, entry in LAZY_COMMANDS.items():
            if name in self.commands:
                continue
            # Name and help only: enough for the listing, typo suggestions and completion.
            stand_in = typer.core.TyperCommand(
                name=name, help=entry.short_help, short_help=entry.short_help
            )
            self._stand_ins[name] = stand_in
            self.commands[name] = stand_in

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            # The help on stdout, as ``sagents --help`` prints it (click's way writes it to
            # stderr), and exit status 2: no command was given.
            typer.echo(ctx.get_help())
            ctx.exit(2)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and command is not None and command is self._stand_ins.get(name):
            command = load_command(name)
            self.commands[name] = command
            del self._stand_ins[name]
        return name, command, rest


app = typer.Typer(
    name="sagents",
    help="Tools, MCP servers, Agent Skills and sandboxed run_script for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    cls=_LazyGroup,
    # The root's help, and usage errors (Typer takes their layout from the root), in click's
    # plain layout: Typer's Rich layout imports Rich, markdown-it and Pygments (over 150 ms,
    # twice the rest of ``sagents --help``) to print a dozen lines. A lazy subcommand's own
    # ``--help`` keeps the Rich layout (its module is loaded anyway).
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print the sagents version and exit.",
        ),
    ] = False,
) -> None:
    """Tools, MCP servers, Agent Skills and sandboxed run_script for LLM agents."""
    from sagents.audit._store import resolve_data_dir  # floor 0, stdlib only: cheap

    resolve_data_dir()


@app.command("version")
def _version() -> None:
    """Print the sagents version."""
    typer.echo(__version__)


def main() -> None:
    """Run the ``sagents`` command."""
    app()
