"""The public list is the documented list: docs/api.md names exactly what the public modules
export (``__all__``, recorded by tests/test_public_api_snapshot.py), and every import path the
docs and the examples show is a public module that exports the imported names.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.test_public_api_snapshot import PUBLIC_MODULES

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
# what a new user copies: the examples are held to the same public paths as the docs
EXAMPLES = sorted(
    path
    for path in (ROOT / "examples").rglob("*")
    if path.suffix in {".py", ".json", ".md"} and path.is_file()
)

FROM_IMPORT = re.compile(
    r"^\s*from\s+(sagents(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n#]+)", re.MULTILINE
)
IMPORT = re.compile(r"^\s*import\s+(sagents(?:\.\w+)*)", re.MULTILINE)
RUN_MODULE = re.compile(r"""-m["',\s]+(sagents(?:\.\w+)*)""")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "api_reference", ROOT / "scripts" / "api_reference.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _listed(page: str) -> dict[str, set[str]]:
    """Module → names, as docs/api.md lists them."""
    listed: dict[str, set[str]] = {}
    module = ""
    for line in page.splitlines():
        heading = re.fullmatch(r"## `(sagents(?:\.\w+)*)`", line)
        if heading:
            module = heading.group(1)
            listed[module] = set()
            continue
        row = re.match(r"\| `(\w+)` \|", line)
        if row and module:
            listed[module].add(row.group(1))
    return listed


def test_the_api_reference_lists_exactly_the_public_modules_and_their_names() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    exported = {name: set(importlib.import_module(name).__all__) for name in PUBLIC_MODULES}
    assert _listed(page) == exported, (
        "docs/api.md and the public modules' __all__ differ: run "
        ".venv/bin/python scripts/api_reference.py, and document a new public name in docs/"
    )


def test_the_generator_reads_the_same_public_modules() -> None:
    assert _generator().public_modules() == PUBLIC_MODULES


def test_the_listing_parser_reads_headings_and_rows() -> None:
    page = "## `sagents.x`\n\ntext\n\n| name | what |\n|---|---|\n| `A` | class: a |\n| `b` | c |\n"
    assert _listed(page) == {"sagents.x": {"A", "b"}}


def _imports_in_docs() -> list[tuple[str, str, list[str]]]:
    """(file, module, names) of every ``from sagents... import`` / ``import sagents...`` /
    ``-m sagents...`` in docs/, the README and examples/."""
    found = []
    for path in [*DOCS, *EXAMPLES]:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT).as_posix()
        for match in FROM_IMPORT.finditer(text):
            names = [
                part.split(" as ")[0].strip()
                for part in match.group(2).strip("() \n").replace("\n", " ").split(",")
            ]
            found.append((where, match.group(1), [name for name in names if name]))
        for pattern in (IMPORT, RUN_MODULE):
            found.extend((where, match.group(1), []) for match in pattern.finditer(text))
    return found


def test_the_docs_import_only_from_public_modules_what_they_export() -> None:
    wrong = []
    for where, module_name, names in _imports_in_docs():
        if module_name not in PUBLIC_MODULES:
            wrong.append(f"{where}: {module_name} is not a public module")
            continue
        exported = set(importlib.import_module(module_name).__all__)
        wrong.extend(
            f"{where}: {module_name} does not export {name!r}"
            for name in names
            if name not in exported
        )
    assert not wrong, "\n".join(wrong)


def test_the_docs_import_scan_sees_each_form() -> None:
    assert FROM_IMPORT.search("from sagents.tool import (\n    ToolManager,\n)")
    assert IMPORT.search("import sagents.tool")
    assert RUN_MODULE.search('"args": ["-m", "sagents.mcp_servers.memory"]')
    assert len(_imports_in_docs()) > 20
    assert any(where.startswith("examples/") for where, _, _ in _imports_in_docs())


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_has_a_section_in_the_reference(name: str) -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert f"## `{name}`" in page


SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(
    r"(?<![\w./-])(sagents(?:\.\w+)+)"
)  # in a code span, alone or within an expression
NOT_NAMES = {"sagents.json", "sagents.pem", "sagents.X"}  # file names and a placeholder
# Telemetry names (span and attribute names, docs/observability.md) are strings the code writes,
# not Python names: a cited one must be spelled, quoted, in the package's source.
WRITTEN = set(
    re.findall(
        r"[\"'](sagents(?:\.\w+)+)[\"']",
        "".join(p.read_text(encoding="utf-8") for p in (ROOT / "sagents").rglob("*.py")),
    )
)


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a name reached by attributes from the longest module."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    return False


def test_every_dotted_name_the_docs_cite_exists() -> None:
    wrong = [
        f"{path.relative_to(ROOT).as_posix()}: {dotted}"
        for path in DOCS
        for dotted in sorted(
            {
                dotted
                for span in SPAN.findall(path.read_text(encoding="utf-8"))
                for dotted in DOTTED.findall(span)
            }
        )
        if dotted not in NOT_NAMES | WRITTEN and not _resolves(dotted)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_dotted_name_check_refuses_a_missing_name() -> None:
    assert _resolves("sagents.tool.tool_manager.call_timeout")
    assert _resolves("sagents.tool.ToolManager.run_tool")
    assert not _resolves("sagents.tool.call_timeout")
