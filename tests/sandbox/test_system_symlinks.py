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


def test_links_to_manual_pages_are_left_out_and_the_others_kept(tmp_path: Path) -> None:
    kept = {
        "awk": "/usr/bin/mawk",
        "java": "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
        "mvn": "/usr/share/maven/bin/mvn",
        "manpath-tool": "/usr/bin/manpath",  # "man" in a command's name is not a manual page
    }
    manuals = {
        "awk.1.gz": "/usr/share/man/man1/mawk.1.gz",
        "vim.da.1.gz": "/usr/share/man/da/man1/vim.1.gz",
        "ABORT.7.gz": "/usr/share/postgresql/15/man/man7/ABORT.7.gz",
        "java.1.gz": "/usr/lib/jvm/java-17-openjdk-amd64/man/man1/java.1.gz",
        "mvn.1.gz": "/usr/share/maven/man/mvn.1.gz",
    }
    for name, target in {**kept, **manuals}.items():
        (tmp_path / name).symlink_to(target)
    assert _links(bwrap._symlinks_of(str(tmp_path))) == {
        f"{tmp_path}/{name}": target for name, target in kept.items()
    }
