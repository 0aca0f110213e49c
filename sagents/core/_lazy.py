"""A package's public names loaded on first use (PEP 562 module ``__getattr__``).

A package whose ``__init__`` imports every submodule makes ``import package._small`` import them
all (Python imports a package before its submodules). A package that lists its names here
instead imports a submodule only when one of its names is first read, so an agent run imports
only what it uses (the MCP SDK, the HTTP stack of ``web_fetch``...). The package also imports
the same names under ``TYPE_CHECKING``, so type checkers see each name's real type.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(
    package: str, sources: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names are the keys of
    ``sources``, each read from the submodule it maps to (``"_loader"``: ``package._loader``).

    A name once read is stored in the package, so later reads are plain attribute reads.
    """

    def __getattr__(name: str) -> object:
        submodule = sources.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value: object = getattr(importlib.import_module(f"{package}.{submodule}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *sources})

    return __getattr__, __dir__
