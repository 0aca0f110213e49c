"""Entry point of the ``sagents`` command, on Typer.

Subcommands are added by the modules of this package; each prints through Rich to stdout only what
its user asked for, and logs go to stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sagents import __version__
from sagents.cli import skills as _skills

__all__ = ["app", "main"]

app = typer.Typer(
    name="sagents",
    help="Tools, MCP servers, Agent Skills and sandboxed run_script for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(_skills.app, name="skills")


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


@app.command("version")
def _version() -> None:
    """Print the sagents version."""
    typer.echo(__version__)


from sagents.cli import serve as _serve_module  # noqa: E402  (registers after the app exists)

app.command("serve")(_serve_module.serve)

from sagents.cli import demo as _demo_module  # noqa: E402
from sagents.cli import run_script as _run_script_module  # noqa: E402

app.command("run-script")(_run_script_module.run_script)
app.command("demo")(_demo_module.demo)

from sagents.cli import tools as _tools_module  # noqa: E402

app.command("tools")(_tools_module.tools_command)
app.command("call")(_tools_module.call_command)

from sagents.cli import chat as _chat_module  # noqa: E402  (imports the agent loop only when run)

app.command("chat")(_chat_module.chat)


def main() -> None:
    """Run the ``sagents`` command."""
    app()
