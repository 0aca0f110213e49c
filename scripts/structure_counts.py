"""Structure counts of the ``sagents`` package, read with ``ast`` (docs/architecture.md).

    python scripts/structure_counts.py [PACKAGE_DIR]

Prints one line per count:

- ``aenter_defs``: hand-written ``async def __aenter__`` definitions (a protocol's
  declaration, whose body is ``...``, is not one);
- ``files_calling_aenter``: files that call ``__aenter__`` or ``__aexit__`` by hand
  (``x.__aenter__()``, ``stack.push_async_exit(x.__aexit__)`` and the like);
- ``pop_all_files``: files with the ``AsyncExitStack ... pop_all()`` idiom (an object that
  enters its parts on a stack in ``__aenter__`` and keeps ``stack.pop_all()`` for later);
- ``modules_over_600`` / ``modules_over_800``: modules longer than 600 / 800 lines;
- ``run_tool_defs`` and ``context_vars``: ``def run_tool`` definitions and ``ContextVar(...)``
  constructions, for comparison with the call path's own counts.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def counts(package: Path) -> dict[str, int]:
    """The counts over every ``.py`` file under ``package``."""
    result = dict.fromkeys(
        (
            "aenter_defs",
            "files_calling_aenter",
            "pop_all_files",
            "modules_over_600",
            "modules_over_800",
            "run_tool_defs",
            "context_vars",
        ),
        0,
    )
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n") + (0 if source.endswith("\n") else 1)
        result["modules_over_600"] += lines > 600
        result["modules_over_800"] += lines > 800
        calls_enter = pops = False
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
                result["aenter_defs"] += node.name == "__aenter__" and not _is_stub(node)
                result["run_tool_defs"] += node.name == "run_tool"
            elif isinstance(node, ast.Attribute) and node.attr in ("__aenter__", "__aexit__"):
                calls_enter = True
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                pops = pops or name == "pop_all"
                result["context_vars"] += name == "ContextVar"
        result["files_calling_aenter"] += calls_enter
        result["pop_all_files"] += pops
    return result


def _is_stub(node: ast.AsyncFunctionDef | ast.FunctionDef) -> bool:
    """A declaration with no body (``...``: a protocol's method), not an implementation."""
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in body)


def main() -> None:
    package = Path(sys.argv[1] if len(sys.argv) > 1 else "sagents")
    for key, value in counts(package).items():
        print(f"{key} {value}")


if __name__ == "__main__":
    main()
