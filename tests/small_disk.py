"""Full-disk helpers for the tests of the stores (the ``small_disk`` fixture mounts the disk)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["fill_disk"]


def fill_disk(folder: Path) -> Path:
    """Fill the file system of ``folder`` with one file; returns it (remove it to free the
    space)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:  # ENOSPC: full
            pass
    return filler
