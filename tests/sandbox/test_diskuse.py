"""The write budget's measurements: directory scan, unlinked-but-held files, process trees."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

from sagents.sandbox._diskuse import (
    ENTRY_COST_BYTES,
    directory_usage_bytes,
    held_unlinked_bytes,
    tree_pids,
)


def test_every_empty_file_costs_at_least_one_entry(tmp_path: Path) -> None:
    before = directory_usage_bytes(str(tmp_path))
    for i in range(100):
        (tmp_path / f"empty{i}").touch()
    assert directory_usage_bytes(str(tmp_path)) - before >= 100 * ENTRY_COST_BYTES


def test_a_hard_linked_file_is_counted_once(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 1_000_000)
    one = directory_usage_bytes(str(tmp_path))
    for i in range(10):
        os.link(tmp_path / "big", tmp_path / f"link{i}")
    assert directory_usage_bytes(str(tmp_path)) - one <= 10 * ENTRY_COST_BYTES


def test_the_scan_does_not_follow_symlinks_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"x" * 4_000_000)
    (root / "link").symlink_to(outside)
    assert directory_usage_bytes(str(root)) < 1_000_000


def test_deep_trees_are_measured_without_running_out_of_descriptors(tmp_path: Path) -> None:
    current = tmp_path
    for _ in range(50):
        current = current / "d"
        current.mkdir()
    for i in range(50):
        (tmp_path / f"wide{i}").mkdir()
    # Allowed: a few descriptors more than this process holds now (whatever the tests before
    # it in this worker left open); a scan holding one per level of the 50 would run out.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + 10, hard))
    try:
        assert directory_usage_bytes(str(tmp_path)) >= 100 * ENTRY_COST_BYTES
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_root_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    with pytest.raises(OSError, match=r"Not a directory|symbolic links"):
        directory_usage_bytes(str(tmp_path / "alias"))


def test_an_unlinked_file_held_open_is_counted(tmp_path: Path) -> None:
    device = os.stat(tmp_path).st_dev
    before = held_unlinked_bytes([os.getpid()], device)
    fd = os.open(tmp_path / "hidden", os.O_CREAT | os.O_RDWR)
    try:
        os.unlink(tmp_path / "hidden")
        os.write(fd, b"x" * 2_000_000)
        os.fsync(fd)
        assert held_unlinked_bytes([os.getpid()], device) - before >= 2_000_000
        assert held_unlinked_bytes([os.getpid()], device + 1) == 0  # another filesystem
    finally:
        os.close(fd)
    assert held_unlinked_bytes([os.getpid()], device) == before


def test_vanished_processes_count_nothing() -> None:
    assert held_unlinked_bytes([2**22 + 12345], 0) == 0


def test_tree_pids_finds_grandchildren() -> None:
    with subprocess.Popen(
        ["sh", "-c", "sleep 120 & echo started; read y"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == b"started\n"
        pids = tree_pids(child.pid)
        assert child.pid in pids
        assert len(pids) >= 2
        for pid in pids:
            os.kill(pid, 9)
    assert tree_pids(os.getpid())[0] == os.getpid()
