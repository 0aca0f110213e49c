"""``sagents serve --watch``: when the polled config file counts as changed
(docs/configuration.md, "Reloading")."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import anyio
import pytest

from sagents.gateway import _reload
from sagents.gateway._reload import ConfigReloader, watch_config

pytestmark = pytest.mark.anyio


class _Reloader:
    def __init__(self) -> None:
        self.reloads = 0
        self.reloaded = anyio.Event()

    async def reload(self) -> None:
        self.reloads += 1
        self.reloaded.set()


async def test_a_file_seen_half_written_is_reloaded_once_it_holds_still(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An editor writing in place truncates the file, then fills it: a poll in between sees an
    # empty (invalid) file. The watcher reloads once the content is the same at two looks in a
    # row, so the half-written state is never loaded (a spurious "config not reloaded").
    whole = (20, 2, "whole")
    looks: Iterator[tuple[int, int, str] | None] = iter(
        [(10, 1, "first"), (0, 2, "empty"), whole, whole]
    )
    finished = anyio.Event()

    def fingerprint(path: Path) -> tuple[int, int, str] | None:
        try:
            return next(looks)
        except StopIteration:
            finished.set()
            return whole

    monkeypatch.setattr(_reload, "_fingerprint", fingerprint)
    reloader = _Reloader()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(
                functools.partial(watch_config, interval_s=0.001),
                cast(ConfigReloader, reloader),
                tmp_path / "sagents.json",
            )
            await finished.wait()
            await reloader.reloaded.wait()
            tg.cancel_scope.cancel()
    assert reloader.reloads == 1
