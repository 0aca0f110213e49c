"""What a sandboxed process tree has put on the host's disk, for the write budget (docs/sandbox.md).

A directory scan alone misses two ways of filling the disk: files unlinked while still open (or
mapped), which no directory lists but which hold their blocks until the last descriptor or
mapping goes, and empty files, which take no data block but an inode each (enough of them
exhaust the filesystem's inodes). :func:`directory_usage_bytes` therefore charges every entry at
least :data:`ENTRY_COST_BYTES`, and :func:`held_unlinked_bytes` adds the unlinked files the
tree's processes still hold, found through ``/proc/<pid>/fd`` and ``/proc/<pid>/map_files``.

The scan walks with descriptors opened ``O_NOFOLLOW`` from the root, at most two at a time: a
directory swapped for a symlink during the scan is skipped, never followed out of the root,
and a tree of many directories cannot exhaust the host process's descriptors.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
from collections.abc import Iterable

__all__ = [
    "ENTRY_COST_BYTES",
    "directory_usage_bytes",
    "held_unlinked_bytes",
    "open_dir_below",
    "tree_pids",
]

ENTRY_COST_BYTES = 4096  # what an entry costs at least: an inode and a directory slot
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_dir_below(root_fd: int, parts: list[str]) -> int:
    """Open the directory ``parts`` below ``root_fd``, one ``O_NOFOLLOW`` component at a time,
    holding at most two descriptors; the caller closes the one returned.

    Raises:
        OSError: when a component is missing, a symlink or not a directory.
    """
    current = os.dup(root_fd)
    try:
        for part in parts:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = nxt
    except BaseException:
        os.close(current)
        raise
    return current


def directory_usage_bytes(root: str) -> int:
    """Bytes used under ``root``: each inode's allocated blocks (``st_blocks``, once per inode
    however many links it has) and, for every entry, at least :data:`ENTRY_COST_BYTES`.

    Entries that vanish or change during the scan are skipped. Blocking: call it from a worker
    thread.
    """
    total = 0
    seen: set[int] = set()
    root_fd = os.open(root, _DIR_FLAGS)
    try:
        todo: list[list[str]] = [[]]
        while todo:
            parts = todo.pop()
            try:
                dfd = open_dir_below(root_fd, parts)
            except OSError:
                continue  # vanished, or replaced by a symlink or a file meanwhile
            try:
                with os.scandir(dfd) as it:
                    for entry in it:
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        blocks = st.st_blocks * 512
                        if st.st_nlink > 1 and not stat_mod.S_ISDIR(st.st_mode):
                            blocks = 0 if st.st_ino in seen else blocks
                            seen.add(st.st_ino)
                        total += max(blocks, ENTRY_COST_BYTES)
                        if stat_mod.S_ISDIR(st.st_mode):
                            todo.append([*parts, entry.name])
            finally:
                os.close(dfd)
    finally:
        os.close(root_fd)
    return total


def held_unlinked_bytes(pids: Iterable[int], device: int) -> int:
    """Blocks of regular files on ``device`` that are unlinked but held open or mapped by
    ``pids`` (each inode counted once, at least :data:`ENTRY_COST_BYTES`).

    Mappings are seen through ``/proc/<pid>/map_files``, which only root may read; elsewhere
    only open descriptors are counted. Processes that end during the scan are skipped.
    """
    total = 0
    seen: set[int] = set()
    for pid in pids:
        for kind in ("fd", "map_files"):
            directory = f"/proc/{pid}/{kind}"
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                try:
                    st = os.stat(f"{directory}/{name}")
                except OSError:
                    continue
                if (
                    st.st_dev != device
                    or st.st_nlink != 0
                    or not stat_mod.S_ISREG(st.st_mode)
                    or st.st_ino in seen
                ):
                    continue
                seen.add(st.st_ino)
                total += max(st.st_blocks * 512, ENTRY_COST_BYTES)
    return total


def tree_pids(root_pid: int) -> list[int]:
    """``root_pid`` and all its descendants, from ``/proc`` (for trees without a cgroup)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{name}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(name))
    found, todo = [root_pid], [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
