"""Each tool's export to an adapter's API, kept by the adapter (docs/tool-schema.md).

The loop offers the same tools on every request of a run, and exporting a schema again on
each one was most of an adapter's own work in a text turn (bench/bench_agent_loop.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Generic, TypeVar

from sagents.core._spec import ToolSpec

__all__ = ["Exported"]

_KEPT = 256  # exports kept per adapter; all are dropped when more come (tools change rarely)
# json.dumps(..., sort_keys=True) builds an encoder on every call: about half of a key's cost,
# made on every request for every tool offered (bench/bench_agent_loop.py). The same text.
_schema_text = json.JSONEncoder(sort_keys=True).encode

T = TypeVar("T")


class Exported(Generic[T]):
    """A tool's export, made by ``export(spec, name)``, kept per name, description and schema.

    A spec with ``meta`` (examples) is exported every time, and so is one whose schema is not
    JSON (the export refuses it clearly). An export that raises is not kept. Callers copy what
    they change: the value is shared by every request.
    """

    def __init__(self, export: Callable[[ToolSpec, str], T]) -> None:
        self._export = export
        self._kept: dict[tuple[str, str, str], T] = {}

    def __call__(self, spec: ToolSpec, name: str) -> T:
        """``spec``'s export under ``name``."""
        try:
            key = (name, spec.description, _schema_text(spec.input_schema))
        except (TypeError, ValueError, RecursionError):
            return self._export(spec, name)
        if spec.meta:
            return self._export(spec, name)
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= _KEPT:
                self._kept.clear()
            kept = self._kept[key] = self._export(spec, name)
        return kept
