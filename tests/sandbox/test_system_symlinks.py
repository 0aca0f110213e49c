"""The sandbox's recreated ``/etc`` symlinks: read once, read again when the directory changes."""

import os
from pathlib import Path

import pytest

from sagents.sandbox import _bwrap as bwrap


def _links(args: list[str]) -> dict[str, str]:
    assert args[0::3] == ["--symlink"] * (len(args) // 3)
    return dict(zip(args[2::3], args[1::3], strict=True))


def test_links_are_read_once_while_the_directory_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "python").symlink_to("/usr/bin/python3.11")
    (tmp_path / "plain").write_text("not a link")
    reads: list[str] = []
    readlink = os.readlink

    def counting(path: str) -> str:
        reads.append(path)
        return readlink(path)

    monkeypatch.setattr(os, "readlink", counting)
    first = bwrap._symlinks_of(str(tmp_path))
    second = bwrap._symlinks_of(str(tmp_path))
    assert _links(first) == {f"{tmp_path}/python": "/usr/bin/python3.11"}
    assert second == first
    assert len(reads) == 1


def test_an_added_or_replaced_link_is_seen_on_the_next_launch(tmp_path: Path) -> None:
    (tmp_path / "python").symlink_to("/usr/bin/python3.11")
    bwrap._symlinks_of(str(tmp_path))
    (tmp_path / "editor").symlink_to("/usr/bin/vi")
    (tmp_path / "python").unlink()
    (tmp_path / "python").symlink_to("/usr/bin/python3.12")
    assert _links(bwrap._symlinks_of(str(tmp_path))) == {
        f"{tmp_path}/editor": "/usr/bin/vi",
        f"{tmp_path}/python": "/usr/bin/python3.12",
    }


def test_a_missing_directory_gives_no_links(tmp_path: Path) -> None:
    assert bwrap._symlinks_of(str(tmp_path / "absent")) == []
