"""The layers of docs/architecture.md ("Layers"): imports point one way, downwards.

Every ``sagents.X`` import in a module of package ``P`` (at module level, under
``TYPE_CHECKING`` or inside a function: a lazy import is still a dependency) names a package on a
lower floor than ``P``, or one of the same-floor pairs the document allows. Each package's
``__init__`` docstring names its floor with the document's number.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sagents"

FLOORS = {
    "errors": 0,
    "audit": 0,
    "store": 0,
    "core": 1,
    "sandbox": 1,
    "mcp": 2,
    "progress": 2,
    "tool": 3,
    "config": 3,
    "script": 4,
    "skill": 4,
    "demo": 4,
    "gateway": 5,
    "agent": 5,
    "cli": 6,
    "testing": 6,
    "mcp_servers": 6,
}
SIBLINGS = frozenset(
    {("audit", "errors"), ("store", "errors"), ("store", "audit"), ("config", "tool")}
)
"""Same-floor imports the document allows: (importer, imported)."""

FLOOR_NOT_YET_NAMED: frozenset[str] = frozenset()
"""Packages whose docstring is being changed on another branch and names no floor yet; this
list only shrinks (a listed package that names its floor fails: remove it)."""


def _package_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def _imported_packages(path: Path) -> set[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[tuple[str, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "sagents" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


def _modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.parent != PACKAGE or path.name != "__init__.py"
    ]


def test_every_package_has_a_floor() -> None:
    packages = {_package_of(path) for path in _modules()}
    assert packages == set(FLOORS), "add the package to docs/architecture.md and FLOORS"


def test_imports_point_downwards() -> None:
    upward = []
    for path in _modules():
        importer = _package_of(path)
        for imported, line in sorted(_imported_packages(path)):
            if imported == importer or imported not in FLOORS:
                continue
            if FLOORS[imported] < FLOORS[importer] or (importer, imported) in SIBLINGS:
                continue
            upward.append(
                f"{path.relative_to(ROOT)}:{line}: {importer} (floor {FLOORS[importer]}) "
                f"imports {imported} (floor {FLOORS[imported]})"
            )
    assert not upward, 'imports against docs/architecture.md, "Layers":\n' + "\n".join(upward)


def test_package_docstrings_name_their_floor() -> None:
    wrong = []
    for name, floor in FLOORS.items():
        init = PACKAGE / name / "__init__.py"
        if not init.is_file():  # a single module (errors.py)
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        named = {int(number) for number in re.findall(r"\bfloor (\d)\b", doc, flags=re.IGNORECASE)}
        if name in FLOOR_NOT_YET_NAMED:
            if named:
                wrong.append(f"{init.relative_to(ROOT)} names its floor: remove it from the list")
            continue
        if named != {floor}:
            wrong.append(f"{init.relative_to(ROOT)}: names {sorted(named)}, the document {floor}")
    assert not wrong, "\n".join(wrong)


def test_the_document_draws_the_same_floors() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    drawn: dict[str, int] = {}
    floor = -1
    for line in block.splitlines():
        match = re.match(r"floor (\d)\s+([a-z_, ]+?)\s{2,}", line)
        if match:
            floor = int(match.group(1))
            names = match.group(2)
        else:
            continuation = re.match(r"\s{9}([a-z][a-z_, ]*?)\s{2,}", line)
            if not continuation:
                continue
            names = continuation.group(1)
        for name in names.split(","):
            drawn[name.strip()] = floor
    assert drawn == FLOORS
