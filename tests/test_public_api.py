"""Meta-tests for conventions a reviewer would otherwise have to remember.

The public API is a short, documented list (``PUBLIC_MODULES`` of
``tests/test_public_api_snapshot.py``, docs/api.md); everything else is private, named with a
leading ``_`` as in httpx and anyio, so a refactor of the internals cannot break a user.
"""

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.test_public_api_snapshot import PUBLIC_MODULES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sagents"


def _module_names() -> list[str]:
    """Every module and package under sagents/ (the data directories without ``__init__``
    hold scripts run by file name, not modules)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        if not all(
            (ROOT / Path(*relative.parts[:end]) / "__init__.py").is_file()
            for end in range(1, len(relative.parts))
        ):
            continue
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


def _is_private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def _importable() -> list[ModuleType]:
    # the run_script guest helper is stdlib-only and runs inside the sandbox
    return [
        importlib.import_module(name)
        for name in _module_names()
        if not name.startswith("sagents.script._guest")
    ]


def test_a_module_without_a_leading_underscore_is_a_documented_public_module() -> None:
    undeclared = sorted(
        name for name in _module_names() if not _is_private(name) and name not in PUBLIC_MODULES
    )
    assert not undeclared, (
        "these modules are public by name but not in the public API: rename each to _name.py "
        "(internal), or add it to PUBLIC_MODULES in tests/test_public_api_snapshot.py, document "
        f"it in docs/ and regenerate docs/api.md: {undeclared}"
    )


def test_every_public_module_exists_and_is_not_private() -> None:
    names = set(_module_names())
    assert [name for name in PUBLIC_MODULES if name not in names or _is_private(name)] == []
    assert len(PUBLIC_MODULES) == len(set(PUBLIC_MODULES))


def test_the_meta_test_sees_a_new_public_module() -> None:
    assert not _is_private("sagents.tool.new_module")
    assert _is_private("sagents.tool._new_module")
    assert _is_private("sagents.script._guest.agent_tools")
    assert "sagents.tool._tool_proxy" in _module_names()


RE_EXPORTS_ALLOWED = frozenset({"sagents.tool.tool_progress", "sagents.tool.mcp_proxy"})
"""Modules that only re-export: the tool layer's historical import paths (docs/tools.md)."""


def _only_re_exports(path: Path) -> bool:
    """Whether a module holds nothing but imports, ``__all__`` and its docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    imports = 0
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports += 1
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        elif isinstance(node, ast.Assign | ast.AnnAssign) and [
            target.id
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        ] == ["__all__"]:
            continue
        else:
            return False
    return imports > 0


def test_no_module_is_a_second_import_path_for_names_defined_elsewhere() -> None:
    shims = sorted(
        name
        for name in _module_names()
        if not (ROOT / Path(*name.split("."))).is_dir()  # a package's façade re-exports
        and name not in RE_EXPORTS_ALLOWED
        and _only_re_exports(ROOT / Path(*name.split(".")).with_suffix(".py"))
    )
    assert not shims, (
        f"these modules only re-export names defined elsewhere: {shims}; import those names "
        "from the module that defines them (or the package's façade) and delete the module"
    )


def test_a_module_of_imports_and_all_is_seen_as_a_re_export(tmp_path: Path) -> None:
    shim = tmp_path / "shim.py"
    shim.write_text('"""Doc."""\n\nfrom a import b\n\n__all__ = ["b"]\n', encoding="utf-8")
    real = tmp_path / "real.py"
    real.write_text('"""Doc."""\n\nfrom a import b\n\nC = b\n', encoding="utf-8")
    assert _only_re_exports(shim)
    assert not _only_re_exports(real)


# A deprecated name still exists: reading it warns (tests/test_names.py checks the warning).
_DEPRECATED_NAMES_WARN = pytest.mark.filterwarnings("ignore:.* is deprecated:DeprecationWarning")


@_DEPRECATED_NAMES_WARN
@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_lists_existing_names_in_all(name: str) -> None:
    module = importlib.import_module(name)
    names = getattr(module, "__all__", None)
    assert names is not None, f"{name} has no __all__"
    missing = [export for export in names if not hasattr(module, export)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"
    assert len(names) == len(set(names))


@_DEPRECATED_NAMES_WARN
@pytest.mark.parametrize("module", _importable(), ids=lambda m: m.__name__)
def test_a_private_module_that_has_all_lists_existing_names(module: ModuleType) -> None:
    missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize("module", _importable(), ids=lambda m: m.__name__)
def test_every_module_has_a_docstring(module: ModuleType) -> None:
    assert (module.__doc__ or "").strip()
