"""``sagents skills``: list, show and validate Agent Skills directories.

Where skills come from for ``list`` and ``show``: every ``--dir`` given (first wins), else the
environment variable ``SAGENTS_SKILLS_PATH`` (roots separated by ``os.pathsep``, first wins). The
gateway's config file will become a third source once it lands.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from sagents.cli.main import WholeHelpGroup
from sagents.errors import SkillRootError
from sagents.skill._manager import SkillManager, scan_root
from sagents.skill._parser import is_skill_dir, parse_skill_dir
from sagents.skill._schema import SkillProblem

__all__ = ["SKILLS_PATH_ENV", "app", "skill_roots"]

SKILLS_PATH_ENV = "SAGENTS_SKILLS_PATH"

app = typer.Typer(
    name="skills",
    help="List, show and validate Agent Skills directories.",
    no_args_is_help=True,
    cls=WholeHelpGroup,
)

_DirOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--dir",
        "-d",
        metavar="<dir>",
        help=f"A skills root (repeatable, first wins). Default: ${SKILLS_PATH_ENV}.",
    ),
]


def skill_roots(dirs: list[Path] | None) -> list[Path]:
    """The roots to read: ``dirs`` if given, else ``$SAGENTS_SKILLS_PATH`` split on os.pathsep."""
    if dirs:
        return list(dirs)
    raw = os.environ.get(SKILLS_PATH_ENV, "")
    return [Path(part) for part in raw.split(os.pathsep) if part.strip()]


@contextmanager
def _quiet_skill_log() -> Iterator[None]:
    """Hold back the library's per-problem log warnings: the commands report problems themselves."""
    skill_logger = logging.getLogger("sagents.skill")
    level = skill_logger.level
    skill_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        skill_logger.setLevel(level)


def _manager(dirs: list[Path] | None) -> SkillManager:
    roots = skill_roots(dirs)
    if not roots:
        typer.echo(f"error: no skills root: pass --dir or set {SKILLS_PATH_ENV}", err=True)
        raise typer.Exit(2)
    manager = SkillManager()
    for root in roots:
        try:
            with _quiet_skill_log():
                manager.add_skill_dir(root)
        except SkillRootError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(2) from error
    return manager


@app.command("list")
def _list(dirs: _DirOption = None) -> None:
    """List the skills found in the roots, with their full descriptions."""
    manager = _manager(dirs)
    skills = manager.list_skills()
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=True)
    for column in ("name", "description", "form", "path"):
        table.add_column(column, overflow="fold")
    for skill in skills:
        table.add_row(skill.name, skill.description, skill.source_form, str(skill.path))
    Console(width=max(100, Console().width)).print(table)
    broken = [p for p in manager.problems() if p.severity == "error"]
    typer.echo(f"{len(skills)} skills", err=True)
    if broken:
        typer.echo(
            f"{len(broken)} problems found: run 'sagents skills validate' on the roots", err=True
        )


@app.command("show")
def _show(
    name: Annotated[str, typer.Argument(help="The skill's name.")], dirs: _DirOption = None
) -> None:
    """Show one skill: its metadata, files and instructions."""
    manager = _manager(dirs)
    skill = manager.get_skill(name)
    if skill is None:
        names = ", ".join(manager.list_skill_names()) or "none"
        typer.echo(f"error: no skill {name!r}; available: {names}", err=True)
        raise typer.Exit(1)
    lines = [
        f"name: {skill.name}",
        f"description: {skill.description}",
        f"form: {skill.source_form}",
        f"path: {skill.path}",
    ]
    if skill.display_name:
        lines.append(f"title: {skill.display_name}")
    if skill.license:
        lines.append(f"license: {skill.license}")
    if skill.compatibility:
        lines.append(f"compatibility: {skill.compatibility}")
    if skill.allowed_tools is not None:
        allowed = " ".join(skill.allowed_tools) or "(none: the field is invalid, see validate)"
        lines.append(f"allowed-tools: {allowed}")
    lines.extend(f"metadata.{key}: {value}" for key, value in skill.metadata.items())
    lines.extend(f"use when: {scenario}" for scenario in skill.activation_scenarios)
    lines.append("files:")
    lines.extend(f"  {path}" for path in skill.files)
    lines.extend(["", skill.body.rstrip()])
    typer.echo("\n".join(lines))


def _validate(path: Path) -> tuple[int, list[SkillProblem]]:
    if path.is_file() and path.name in ("SKILL.md", "skill.yaml"):
        path = path.parent
    if is_skill_dir(path):
        load = parse_skill_dir(path)
        return 1, list(load.problems)
    directories = scan_root(path)
    manager = SkillManager()
    with _quiet_skill_log():
        manager.add_skill_dir(path)
        return len(directories), manager.problems()


@app.command("validate")
def _validate_command(
    path: Annotated[
        Path,
        typer.Argument(help="One skill directory (or its SKILL.md), or a root holding several."),
    ],
    strict: Annotated[
        bool, typer.Option("--strict", help="Also fail on what is only non-portable.")
    ] = False,
) -> None:
    """Check skills against the Agent Skills specification; exit 1 when there are problems."""
    try:
        checked, problems = _validate(path)
    except SkillRootError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error
    for problem in problems:
        typer.echo(str(problem))
    counts = {
        severity: sum(p.severity == severity for p in problems)
        for severity in ("error", "non_portable", "warning")
    }
    typer.echo(
        f"checked {_count(checked, 'skill directory', 'skill directories')}: "
        f"{_count(counts['error'], 'error')}, {counts['non_portable']} non-portable, "
        f"{_count(counts['warning'], 'warning')}"
    )
    if checked == 0:
        typer.echo(f"error: no skill directory in {str(path)!r}", err=True)
        raise typer.Exit(1)
    if counts["error"] or (strict and counts["non_portable"]):
        raise typer.Exit(1)


def _count(number: int, singular: str, plural: str | None = None) -> str:
    """``1 error``, ``2 errors``."""
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
