"""Fixtures for the sandbox suites: one sandbox per provider, each on its own workspace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sagents.sandbox import Sandbox, SandboxLimits, SandboxParams, create_sandbox
from sagents.sandbox import _local as local
from sagents.sandbox._types import SandboxKind

TEST_LIMITS = SandboxLimits(
    memory_bytes=512 * 1024**2,
    processes=64,
    tmp_size_bytes=16 * 1024**2,
    write_budget_bytes=8 * 1024**2,
    wall_timeout_seconds=60.0,
)


async def _open(kind: SandboxKind, workspace: Path) -> AsyncIterator[Sandbox]:
    sandbox = create_sandbox(kind, SandboxParams(workspace=str(workspace), limits=TEST_LIMITS))
    async with sandbox:
        yield sandbox


@pytest.fixture(params=["local", "passthrough", "memory"])
async def any_sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Sandbox]:
    """Every provider (the file API and the built-in commands all of them run)."""
    async for sandbox in _open(request.param, tmp_path / "ws"):
        yield sandbox


@pytest.fixture(params=["local", "passthrough", "local-fork"])
async def process_sandbox(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Sandbox]:
    """Providers that run real programs; ``local-fork`` starts them the fallback way (a
    ``preexec_fn`` instead of ``posix_spawn`` + ``prlimit``)."""
    kind = request.param
    if kind == "local-fork":
        monkeypatch.setattr(local, "find_helpers", lambda: None)
        kind = "local"
    async for sandbox in _open(kind, tmp_path / "ws"):
        yield sandbox


@pytest.fixture
async def bwrap_sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    """The bubblewrap provider (CI is root with bubblewrap installed)."""
    async for sandbox in _open("local", tmp_path / "ws"):
        yield sandbox
