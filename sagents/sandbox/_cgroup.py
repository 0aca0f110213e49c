"""A memory+pids cgroup per sandboxed process tree (a leaf that touches the OS).

When running as root, RLIMIT_NPROC does not bind, so only a ``pids`` cgroup stops a fork bomb,
and only a ``memory`` cgroup bounds the memory of a whole tree (docs/sandbox.md, "cgroups"). The
cgroup is created below the cgroup this process is already in (we never touch our siblings),
and the forked child enters it itself, before it execs bubblewrap, by writing to a
``cgroup.procs`` descriptor the parent opened: nothing the child starts can run outside it.

cgroup v1 (separate ``memory`` and ``pids`` hierarchies) and v2 (a unified hierarchy whose
parent delegates the ``memory`` and ``pids`` controllers) are supported. Where neither is
writable, :func:`cgroup_support` says why, and the sandbox reports it in ``describe()``.

Where the ``cpu`` controller is writable too (v1: a ``cpu`` hierarchy; v2: ``cpu.max``), the
tree gets a CFS quota (``cpu_cores`` × the period per period), so that up to 256 busy processes
still use at most that many cores; elsewhere :attr:`Cgroup.cpu_limited` is False and the
launcher lowers the tree's priority instead (``nice`` 19).

A host killed with SIGKILL leaves its (empty) cgroups behind: :func:`remove_stale_cgroups`
removes ours (named ``sagents-<16 hex>``) that hold no process, at start.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import signal
import time
import uuid
from dataclasses import dataclass

__all__ = [
    "CPU_PERIOD_US",
    "STALE_AFTER_SECONDS",
    "Cgroup",
    "CgroupSupport",
    "cgroup_support",
    "create_cgroup",
    "remove_stale_cgroups",
]

logger = logging.getLogger(__name__)

CGROUP_ROOT = "/sys/fs/cgroup"
REMOVE_TRIES = 50  # rmdir attempts (10 ms apart) while the kernel still holds an emptied cgroup
KILL_ROUNDS = 200  # rounds of "read cgroup.procs, SIGKILL each" before giving up
CPU_PERIOD_US = 100_000  # CFS period of the cpu quota: the kernel's default, 100 ms
# A cgroup of ours this old and empty is stale; a younger one may be another process's, just
# created, whose launcher has not entered it yet (milliseconds).
STALE_AFTER_SECONDS = 60.0
_NAME = re.compile(r"sagents-[0-9a-f]{16}\Z")


@dataclass(frozen=True, kw_only=True)
class CgroupSupport:
    """Whether per-sandbox cgroups can be created here.

    Attributes:
        available: True when memory and pids cgroups can be created.
        version: ``v1``, ``v2`` or None.
        reason: Why not, in plain English, when unavailable.
        cpu: True when the cpu controller is writable too (CPU quotas).
    """

    available: bool
    version: str | None
    reason: str = ""
    cpu: bool = False


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
    """Return (version, {controller: dir to create our cgroups in}), or None. For v1 the
    ``cpu`` hierarchy is included when there is one; it is optional."""
    own = _own_cgroup_paths()
    v1: dict[str, str] = {}
    for controller in ("memory", "pids", "cpu"):
        mount = os.path.join(CGROUP_ROOT, controller)
        if controller in own and os.path.isfile(os.path.join(mount, "cgroup.procs")):
            v1[controller] = os.path.join(mount, own[controller].lstrip("/"))
    if "memory" in v1 and "pids" in v1:
        return "v1", v1
    if "" in own and os.path.isfile(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        return "v2", {"": os.path.join(CGROUP_ROOT, own[""].lstrip("/"))}
    return None


def cgroup_support() -> CgroupSupport:
    """Probe (by creating and removing a cgroup) whether per-sandbox cgroups work here, after
    removing the stale cgroups of earlier sagents processes (:func:`remove_stale_cgroups`)."""
    remove_stale_cgroups()
    try:
        probe = create_cgroup(memory_bytes=None, processes=None, cpu_cores=1.0)
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
    return CgroupSupport(available=True, version=probe.version, cpu=probe.cpu_limited)


@dataclass(frozen=True, kw_only=True)
class Cgroup:
    """One sandbox's cgroup (one directory per hierarchy).

    Attributes:
        version: ``v1`` or ``v2``.
        dirs: The cgroup directories (v1: memory, pids and, where there is one, cpu; v2: one).
        cpu_limited: True when a cpu quota was set on it.
    """

    version: str
    dirs: tuple[str, ...]
    cpu_limited: bool = False

    def pids(self) -> list[int]:
        """Processes currently in the cgroup (empty when it is gone)."""
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError), open(os.path.join(d, "cgroup.procs")) as f:
                found.update(int(x) for x in f.read().split())
        return sorted(found)

    def signal_all(self) -> list[int]:
        """SIGKILL every process in the cgroup once (``cgroup.kill`` on v2), without waiting
        for them to go; returns the pids signalled."""
        kill_file = os.path.join(self.dirs[0], "cgroup.kill")
        if self.version == "v2" and os.path.exists(kill_file):
            with contextlib.suppress(OSError), open(kill_file, "w") as f:
                f.write("1")
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids

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
        """Remove the cgroup directories (after :meth:`kill_all`); missing ones are fine.

        The kernel may still hold an emptied cgroup busy for a moment (``EBUSY``): it is tried
        again, :data:`REMOVE_TRIES` times at most. One it still refuses is left, with a
        warning, to :func:`remove_stale_cgroups` at a later start: a sandbox's teardown never
        fails on it."""
        for d in self.dirs:
            for _ in range(REMOVE_TRIES):
                try:
                    os.rmdir(d)
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        logger.warning("cannot remove the sandbox cgroup %s: %s", d, exc)
                        break
                    self.kill_all()
                    time.sleep(0.01)  # no event tells when the kernel lets it go
                else:
                    break
            else:
                logger.warning("the sandbox cgroup %s stays busy; a later start removes it", d)


def _write(path: str, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


def _cpu_quota(cores: float) -> int:
    return max(1000, round(cores * CPU_PERIOD_US))  # the kernel's minimum quota is 1 ms


def create_cgroup(
    *, memory_bytes: int | None, processes: int | None, cpu_cores: float | None = None
) -> Cgroup | None:
    """Create a cgroup below our own with the given limits.

    Args:
        memory_bytes: Memory limit of the whole tree (swap included where the kernel counts it).
        processes: Most processes (and threads) the tree may hold at once.
        cpu_cores: CPU time of the whole tree per wall-clock second, in cores; applied where
            the cpu controller is writable (see :attr:`Cgroup.cpu_limited`).

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
    cpu_limited = False
    try:
        for controller, parent in parents.items():
            path = os.path.join(parent, name)
            if controller == "cpu":
                try:
                    os.mkdir(path)
                except OSError:
                    continue  # optional: the launcher lowers the priority instead
                created.append(path)
                if cpu_cores is not None:
                    _write(os.path.join(path, "cpu.cfs_period_us"), str(CPU_PERIOD_US))
                    _write(os.path.join(path, "cpu.cfs_quota_us"), str(_cpu_quota(cpu_cores)))
                    cpu_limited = True
                continue
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
                if cpu_cores is not None and os.path.exists(os.path.join(path, "cpu.max")):
                    _write(
                        os.path.join(path, "cpu.max"), f"{_cpu_quota(cpu_cores)} {CPU_PERIOD_US}"
                    )
                    cpu_limited = True
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
    return Cgroup(version=version, dirs=tuple(created), cpu_limited=cpu_limited)


def remove_stale_cgroups(*, min_age_s: float = STALE_AFTER_SECONDS) -> list[str]:
    """Remove the cgroups a previous sagents process left behind (killed with SIGKILL, it could
    not remove them): only directories named like ours, directly below our own cgroup, that
    hold no process and were created more than ``min_age_s`` seconds ago. A cgroup of a
    sandbox still running (here or in another sagents process sharing our cgroup) holds its
    processes, or is younger, and is kept; a directory that cannot be removed is skipped.

    Args:
        min_age_s: Age in seconds below which an empty cgroup is kept.

    Returns:
        The directories removed.
    """
    found = _parent_dirs()
    if found is None:
        return []
    removed: list[str] = []
    for parent in found[1].values():
        try:
            names = [n for n in os.listdir(parent) if _NAME.match(n)]
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            try:
                if time.time() - os.stat(path).st_mtime < min_age_s:
                    continue
                with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
                    if f.read().strip():
                        continue
                os.rmdir(path)  # the kernel refuses (EBUSY) if a process entered meanwhile
            except OSError:
                continue
            removed.append(path)
    return removed
