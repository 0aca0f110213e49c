"""No reach into the private parts of the libraries sagents stands on (their private APIs can
change in any release): no import of a private module of another package, no private attribute
of asyncio, anyio, httpx or the MCP SDK's modules, and the one reach the MCP SDK leaves no
public way around (a request's ``Connection``) made in one place,
:func:`sagents.gateway._sessions.request_connection`, which says why."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import sagents

ROOT = Path(sagents.__file__).parent
LIBRARIES = {"asyncio", "anyio", "httpx", "httpx2", "httpcore", "httpcore2", "mcp", "mcp_types"}


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(ROOT.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_a_private_module_of_another_package() -> None:
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in names:
                root, *rest = name.split(".")
                if root not in ("sagents", "__future__") and any(map(_private, rest)):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert found == []


def test_no_module_reads_a_private_attribute_of_a_library_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and _private(node.attr)
        and isinstance(node.value, ast.Name)
        and node.value.id in LIBRARIES
    ]
    assert found == []


def test_the_request_connection_is_reached_in_one_place() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {function.name}"
        for path, tree in _modules()
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and node.attr == "_connection"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "session"
    ]
    assert found == ["gateway/_sessions.py: request_connection"]
