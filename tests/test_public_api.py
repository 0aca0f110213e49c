"""Meta-tests for conventions a reviewer would otherwise have to remember.

The public API is a short, documented list (``PUBLIC_MODULES`` of
``tests/test_public_api_snapshot.py``, docs/api.md); everything else is private, named with a
leading ``_`` as in httpx and anyio, so a refactor of the internals cannot break a user.
"""

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


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_lists_existing_names_in_all(name: str) -> None:
    module = importlib.import_module(name)
    names = getattr(module, "__all__", None)
    assert names is not None, f"{name} has no __all__"
    missing = [export for export in names if not hasattr(module, export)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module", _importable(), ids=lambda m: m.__name__)
def test_a_private_module_that_has_all_lists_existing_names(module: ModuleType) -> None:
    missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize("module", _importable(), ids=lambda m: m.__name__)
def test_every_module_has_a_docstring(module: ModuleType) -> None:
    assert (module.__doc__ or "").strip()
