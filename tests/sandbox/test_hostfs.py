"""Host-side confined file access: ``safe_open_in`` and ``HostFiles``."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagents.errors import PathNotAllowedError
from sagents.sandbox import HostFiles, open_dir_fd, safe_open_in


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "root" / "sub" / "f.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    return tmp_path / "root"


@pytest.fixture
def dir_fd(root: Path) -> Iterator[int]:
    fd = open_dir_fd(str(root))
    yield fd
    os.close(fd)


def test_safe_open_in_creates_and_writes_below_the_directory(root: Path, dir_fd: int) -> None:
    fd = safe_open_in(dir_fd, "sub/new.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.write(fd, b"written")
    os.close(fd)
    assert (root / "sub" / "new.txt").read_text() == "written"


@pytest.mark.parametrize("relpath", ["/etc/passwd", "../secret.txt", "sub/../../x", "", "."])
def test_safe_open_in_refuses_absolute_and_dotdot_paths(dir_fd: int, relpath: str) -> None:
    with pytest.raises(PathNotAllowedError):
        safe_open_in(dir_fd, relpath, os.O_RDONLY)


def test_safe_open_in_never_follows_a_final_symlink(root: Path, dir_fd: int) -> None:
    (root / "out.txt").symlink_to(root.parent / "secret.txt")
    with pytest.raises(PathNotAllowedError, match="symlink"):
        safe_open_in(dir_fd, "out.txt", os.O_WRONLY | os.O_TRUNC)
    assert (root.parent / "secret.txt").read_text() == "outside"


def test_safe_open_in_never_follows_a_directory_symlink(root: Path, dir_fd: int) -> None:
    (root / "records").symlink_to(root.parent)
    with pytest.raises(PathNotAllowedError, match="symlink"):
        safe_open_in(dir_fd, "records/secret.txt", os.O_RDONLY)


def test_open_dir_fd_refuses_a_symlinked_directory(root: Path) -> None:
    (root / "link").symlink_to(root / "sub")
    with pytest.raises(PathNotAllowedError):
        open_dir_fd(str(root / "link"))


def test_symlinks_inside_the_root_are_followed(root: Path) -> None:
    (root / "alias").symlink_to("sub/f.txt")
    (root / "subalias").symlink_to(root / "sub")  # absolute host path: not a sandbox path
    files = HostFiles(str(root), "/workspace")
    assert files.read_file("alias") == b"inside"
    with pytest.raises(PathNotAllowedError):
        files.read_file("subalias/f.txt")
    (root / "subalias2").symlink_to("/workspace/sub")  # absolute sandbox path: inside
    assert files.read_file("subalias2/f.txt") == b"inside"


def test_symlink_loops_are_refused(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    with pytest.raises(PathNotAllowedError, match="too many symlinks"):
        HostFiles(str(root), "/workspace").read_file("a")


def test_remove_deletes_the_link_not_its_target(root: Path) -> None:
    (root / "alias").symlink_to("sub/f.txt")
    HostFiles(str(root), "/workspace").remove("alias")
    assert not (root / "alias").exists()
    assert (root / "sub" / "f.txt").read_text() == "inside"


def test_writing_through_a_link_into_a_read_only_subpath_is_refused(root: Path) -> None:
    (root / ".agent").mkdir()
    (root / "innocent").symlink_to(".agent")
    files = HostFiles(str(root), "/workspace", read_only_subpaths=(".agent",))
    with pytest.raises(PathNotAllowedError, match="read-only"):
        files.write_file("innocent/forged.txt", b"x")
    with pytest.raises(PathNotAllowedError, match="read-only"):
        files.mkdir("innocent/dir")
    assert list((root / ".agent").iterdir()) == []


def test_nul_bytes_in_paths_are_refused(root: Path) -> None:
    with pytest.raises(PathNotAllowedError):
        HostFiles(str(root), "/workspace").read_file("sub/f.txt\x00.png")


def test_usage_counts_allocated_bytes(root: Path) -> None:
    files = HostFiles(str(root), "/workspace")
    before = files.usage_bytes()
    (root / "big.bin").write_bytes(b"x" * 100_000)
    assert files.usage_bytes() - before >= 100_000


def test_a_planted_fifo_neither_blocks_nor_is_opened(root: Path, dir_fd: int) -> None:
    os.mkfifo(root / "output.txt")
    with pytest.raises(PathNotAllowedError, match="not a regular file"):
        safe_open_in(dir_fd, "output.txt", os.O_WRONLY)
    with pytest.raises(PathNotAllowedError, match="not a regular file"):
        HostFiles(str(root), "/workspace").read_file("output.txt")


def test_safe_open_in_returns_a_blocking_descriptor(dir_fd: int) -> None:
    fd = safe_open_in(dir_fd, "sub/f.txt", os.O_RDONLY)
    try:
        assert os.get_blocking(fd)
        assert os.read(fd, 100) == b"inside"
    finally:
        os.close(fd)


def test_glob_over_many_directories_holds_few_descriptors(tmp_path: Path) -> None:
    # A sandboxed program can create thousands of directories; a walk that keeps one open
    # descriptor per pending directory would exhaust the host process's descriptors (every
    # other session served by the process would fail meanwhile) and silently skip the rest.
    for i in range(400):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "x.txt").write_text("x")
    files = HostFiles(str(tmp_path), "/workspace")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 50, hard))
    try:
        found = files.glob("**/x.txt")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(found) == 400
