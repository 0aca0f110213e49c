"""``create_sandbox``: build a provider by name (docs/sandbox.md).

``local`` is bubblewrap isolation and fails loudly where bubblewrap is missing — there is no
silent fallback to ``passthrough``, which must be asked for by name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sagents.sandbox._local import LocalSandbox
from sagents.sandbox._memory import MemorySandbox
from sagents.sandbox._protocol import Sandbox
from sagents.sandbox._types import SandboxKind, SandboxParams

__all__ = ["create_sandbox"]


def create_sandbox(
    kind: SandboxKind = "local",
    params: SandboxParams | None = None,
    **overrides: Any,
) -> Sandbox:
    """Build a sandbox provider.

    Args:
        kind: ``local`` (bubblewrap), ``passthrough`` (no isolation; logs a warning) or
            ``memory`` (files in this process; built-in commands only).
        params: The parameters; may be omitted when ``workspace=...`` is given in overrides.
        **overrides: Fields of :class:`SandboxParams` to set or replace
            (``workspace=``, ``mode=``, ``limits=``, ...).

    Returns:
        The provider; use it as ``async with create_sandbox(...) as sandbox:``.

    Raises:
        SandboxUnavailableError: ``local`` where bubblewrap is missing or unusable (the hint
            says ``apt-get install bubblewrap``).
        ValueError: for an unknown ``kind`` or missing ``workspace``.
    """
    if params is None:
        if "workspace" not in overrides:
            raise ValueError("create_sandbox needs params or workspace=...")
        params = SandboxParams(**overrides)
    elif overrides:
        params = replace(params, **overrides)
    if kind == "local":
        return LocalSandbox(params, isolated=True)
    if kind == "passthrough":
        return LocalSandbox(params, isolated=False)
    if kind == "memory":
        return MemorySandbox(params)
    raise ValueError(f"unknown sandbox kind {kind!r}: use 'local', 'passthrough' or 'memory'")
