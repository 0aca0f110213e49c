"""A memory+pids cgroup per sandboxed process tree (a leaf that touches the OS).

When running as root, RLIMIT_NPROC does not bind, so only a ``pids`` cgroup stops a fork bomb,
and only a ``memory`` cgroup bounds the memory of a whole tree (issue 4 §1). The cgroup is
created below the cgroup this process is already in (we never touch our siblings), and the
forked child enters it itself, before it execs bubblewrap, by writing to a ``cgroup.procs``
descriptor the parent opened: nothing the child starts can run outside it.

cgroup v1 (separate ``memory`` and ``pids`` hierarchies) and v2 (a unified hierarchy whose
parent delegates the ``memory`` and ``pids`` controllers) are supported. Where neither is
writable, :func:`cgroup_support` says why, and the sandbox reports it in ``describe()``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from dataclasses import dataclass

__all__ = ["Cgroup", "CgroupSupport", "cgroup_support", "create_cgroup"]

CGROUP_ROOT = "/sys/fs/cgroup"
KILL_ROUNDS = 200  # rounds of "read cgroup.procs, SIGKILL each" before giving up


@dataclass(frozen=True, kw_only=True)
class CgroupSupport:
    """Whether per-sandbox cgroups can be created here.

    Attributes:
        available: True when memory and pids cgroups can be created.
        version: ``v1``, ``v2`` or None.
        reason: Why not, in plain English, when unavailable.
    """

    available: bool
    version: str | None
    reason: str = ""


def _own_cgroup_paths() -> dict[str, str]:
    """Map controller (or "" for v2) to this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(","):
                paths[name] = path
    return paths


def _parent_dirs() -> tuple[str, dict[str, str]] | None:
    """Return (version, {controller: dir to create our cgroups in}), or None."""
    own = _own_cgroup_paths()
    v1: dict[str, str] = {}
    for controller in ("memory", "pids"):
        mount = os.path.join(CGROUP_ROOT, controller)
        if controller in own and os.path.isfile(os.path.join(mount, "cgroup.procs")):
            v1[controller] = os.path.join(mount, own[controller].lstrip("/"))
    if len(v1) == 2:
        return "v1", v1
    if "" in own and os.path.isfile(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        return "v2", {"": os.path.join(CGROUP_ROOT, own[""].lstrip("/"))}
    return None


def cgroup_support() -> CgroupSupport:
    """Probe (by creating and removing a cgroup) whether per-sandbox cgroups work here."""
    try:
        probe = create_cgroup(memory_bytes=None, processes=None)
    except OSError as exc:
        return CgroupSupport(
            available=False,
            version=None,
            reason=f"cgroups are not writable here ({exc.strerror or exc})",
        )
    if probe is None:
        return CgroupSupport(
            available=False,
            version=None,
            reason="no memory and pids cgroup controllers are available to this process",
        )
    probe.remove()
    return CgroupSupport(available=True, version=probe.version)


@dataclass(frozen=True, kw_only=True)
class Cgroup:
    """One sandbox's cgroup (one directory per hierarchy).

    Attributes:
        version: ``v1`` or ``v2``.
        dirs: The cgroup directories (v1: memory and pids; v2: one).
    """

    version: str
    dirs: tuple[str, ...]

    def pids(self) -> list[int]:
        """Processes currently in the cgroup (empty when it is gone)."""
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.procs")) as f:
                found.update(int(x) for x in f.read().split())
        return sorted(found)

    def kill_all(self) -> bool:
        """SIGKILL every process in the cgroup until it is empty; True when it emptied."""
        kill_file = os.path.join(self.dirs[0], "cgroup.kill")
        if self.version == "v2" and os.path.exists(kill_file):
            with contextlib.suppress(OSError), open(kill_file, "w") as f:
                f.write("1")
        for _ in range(KILL_ROUNDS):
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            os.sched_yield()
        return not self.pids()

    def remove(self) -> None:
        """Remove the cgroup directories (after :meth:`kill_all`); missing ones are fine."""
        for d in self.dirs:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(d)


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


def create_cgroup(*, memory_bytes: int | None, processes: int | None) -> Cgroup | None:
    """Create a cgroup below our own with the given limits.

    Args:
        memory_bytes: Memory limit of the whole tree (swap included where the kernel counts it).
        processes: Most processes (and threads) the tree may hold at once.

    Returns:
        The cgroup, or None when no suitable hierarchy exists.

    Raises:
        OSError: when the hierarchy exists but cannot be written (not root, read-only mount).
    """
    found = _parent_dirs()
    if found is None:
        return None
    version, parents = found
    name = f"sagents-{uuid.uuid4().hex[:16]}"
    created: list[str] = []
    try:
        for controller, parent in parents.items():
            path = os.path.join(parent, name)
            os.mkdir(path)
            created.append(path)
            if version == "v2":
                if not os.path.exists(os.path.join(path, "pids.max")) or not os.path.exists(
                    os.path.join(path, "memory.max")
                ):
                    raise PermissionError(1, "memory and pids controllers are not delegated")
                if memory_bytes is not None:
                    _write(os.path.join(path, "memory.max"), str(memory_bytes))
                    with contextlib.suppress(OSError):
                        _write(os.path.join(path, "memory.swap.max"), "0")
                if processes is not None:
                    _write(os.path.join(path, "pids.max"), str(processes))
            elif controller == "memory" and memory_bytes is not None:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(memory_bytes))
                with contextlib.suppress(OSError):
                    _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(memory_bytes))
            elif controller == "pids" and processes is not None:
                _write(os.path.join(path, "pids.max"), str(processes))
    except OSError:
        for path in created:
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise
    return Cgroup(version=version, dirs=tuple(created))
