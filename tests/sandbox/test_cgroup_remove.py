"""Removing a sandbox's cgroup while the kernel still holds it busy (EBUSY) never fails the
sandbox's teardown (sagents/sandbox/_cgroup.py, ``Cgroup.remove``)."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sagents.sandbox import _cgroup
from sagents.sandbox._cgroup import Cgroup


def _busy_rmdir(times: int) -> tuple[list[str], Callable[[str], None]]:
    calls: list[str] = []
    real = os.rmdir

    def rmdir(path: str) -> None:
        calls.append(path)
        if len(calls) <= times:
            raise OSError(errno.EBUSY, "Device or resource busy", path)
        real(path)

    return calls, rmdir


def test_a_cgroup_busy_for_a_moment_is_removed_on_a_later_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "sagents-0123456789abcdef"
    folder.mkdir()
    calls, rmdir = _busy_rmdir(times=3)
    monkeypatch.setattr(os, "rmdir", rmdir)
    Cgroup(version="v1", dirs=(str(folder),)).remove()
    assert not folder.exists()
    assert len(calls) == 4


def test_a_cgroup_that_stays_busy_is_left_with_a_warning_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "sagents-0123456789abcdef"
    folder.mkdir()
    calls, rmdir = _busy_rmdir(times=10_000)
    monkeypatch.setattr(os, "rmdir", rmdir)
    with caplog.at_level(logging.WARNING, logger="sagents.sandbox._cgroup"):
        Cgroup(version="v1", dirs=(str(folder),)).remove()
    assert folder.exists()
    assert len(calls) == _cgroup.REMOVE_TRIES
    assert "stays busy" in caplog.text
