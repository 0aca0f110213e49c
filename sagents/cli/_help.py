"""The help layout every ``sagents`` command group shares (click's plain layout)."""

from __future__ import annotations

from typing import Any

import typer.core

__all__ = ["WholeHelpGroup"]


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
