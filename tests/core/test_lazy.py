"""Packages whose public names load on first use (sagents.core._lazy): every name still imports
from where it always did, is the object its submodule defines, and an unknown name is an
``AttributeError`` naming it."""

from __future__ import annotations

import importlib

import pytest

LAZY_PACKAGES = ("sagents.config", "sagents.tool.impl")


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_is_the_object_of_its_submodule(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        defined_in = importlib.import_module(getattr(value, "__module__", package))
        if defined_in.__name__.startswith(package + "."):
            assert getattr(defined_in, name) is value, name
        assert name in dir(module)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_an_unknown_name_is_an_attribute_error_naming_it(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"{package}.*NoSuchName"):
        getattr(module, "NoSuchName")  # noqa: B009 - a name mypy must not check
    with pytest.raises(ImportError, match="NoSuchName"):
        exec(f"from {package} import NoSuchName", {})


def test_the_documented_import_paths_still_work() -> None:
    from sagents.config import SagentsConfig, load_config
    from sagents.config._loader import SagentsConfig as LoaderConfig
    from sagents.tool.impl import WebFetcher, register_builtin_tools
    from sagents.tool.impl._builtin import register_builtin_tools as builtin_register
    from sagents.tool.impl._web_fetch import WebFetcher as FetchWebFetcher

    assert SagentsConfig is LoaderConfig
    assert callable(load_config)
    assert register_builtin_tools is builtin_register
    assert WebFetcher is FetchWebFetcher
