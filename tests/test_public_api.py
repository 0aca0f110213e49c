"""Meta-tests for conventions a reviewer would otherwise have to remember."""

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import sagents


def _modules() -> list[ModuleType]:
    found = [sagents]
    for info in pkgutil.walk_packages(sagents.__path__, prefix="sagents."):
        if ".guest" in info.name:
            continue  # the run_script guest helper is stdlib-only and runs inside the sandbox
        found.append(importlib.import_module(info.name))
    return found


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_every_module_lists_existing_names_in_all(module: ModuleType) -> None:
    names = getattr(module, "__all__", None)
    assert names is not None, f"{module.__name__} has no __all__"
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it lacks: {missing}"
    assert len(names) == len(set(names))


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_every_public_class_and_function_defined_in_a_module_is_in_all(
    module: ModuleType,
) -> None:
    names = set(getattr(module, "__all__", []))
    defined = [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and name.isidentifier()  # pydantic files parametrised generics as "Request[...]"
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == module.__name__
    ]
    assert not [n for n in defined if n not in names], f"{module.__name__}: add to __all__"


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_every_module_has_a_docstring(module: ModuleType) -> None:
    assert (module.__doc__ or "").strip()
