"""Running, watching and killing one sandboxed process tree (a leaf that touches the OS).

:func:`open_process` starts the launcher (bubblewrap, or the program itself for
``passthrough``) through :mod:`sagents.sandbox._launcher`, which puts it in its cgroup, under its
rlimits and with exactly the descriptors it was given before anything of it runs. The parent
drains the pipes without threads (``anyio.wait_readable``), learns of the exit through a
pidfd, and ends the whole tree — PID namespace, cgroup, process group — on timeout, on a
write-budget or workspace-quota overrun, on request, or when the owning context exits.

The watchdog survives what happens to the host around it: a workspace removed under a running
tree (an operator cleaning up) ends the write-budget measurement, with a warning; a scan that
fails otherwise (no descriptor left, ``EMFILE``) is retried at the next interval, with a
warning when it starts failing and a note when it works again. Neither ends the tree nor the
process that runs it; the wall-clock timeout holds in every case.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import anyio
import anyio.abc

from sagents.errors import SandboxError
from sagents.sandbox._cgroup import Cgroup
from sagents.sandbox._diskuse import held_unlinked_bytes, tree_pids
from sagents.sandbox._launcher import Child, start_child
from sagents.sandbox._types import KillReason, SandboxLimits

__all__ = ["LocalProcess", "ProcessSpec", "open_process", "watchdog_interval"]

logger = logging.getLogger(__name__)

WATCHDOG_POLL_SECONDS = 0.25  # how often the write budget is measured, at most
WATCHDOG_SCAN_SHARE = 10  # wait >= 10x the last scan's duration: a huge workspace costs <10% CPU
# ...but never longer than this: a tree that first creates many files (each scan slower) would
# otherwise stretch the interval and write unmeasured meanwhile (docs/sandbox.md, "fill the disk").
WATCHDOG_MAX_INTERVAL_SECONDS = 2.0
READ_CHUNK_BYTES = 64 * 1024
KILL_REAP_SECONDS = 10.0  # bound on reaping after SIGKILL
KILL_ROUNDS_ASYNC = 50  # rounds of "list the tree, wait for each" in wait_tree_gone
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, kw_only=True)
class ProcessSpec:
    """Everything :func:`open_process` needs; built by a provider, not by callers.

    Attributes:
        argv: What to exec on the host (``bwrap ... -- cmd`` or the command itself).
        env: The exec'd program's complete environment.
        cwd: Host working directory of the exec'd program.
        fd_map: ``{number in child: descriptor in parent}``; numbers must be >= 3 and dense
            from 3 (run_script's ``{3: req_w, 4: rep_r}``, then bwrap's bind descriptors).
        stdin: ``"pipe"``, ``"devnull"``, or a descriptor.
        stdout: ``"pipe"`` or a descriptor (a log file).
        stderr: ``"pipe"``, ``"stdout"`` (same as stdout) or a descriptor.
        limits: rlimits to set; the cgroup carries the tree-wide ones.
        cgroup: The tree's cgroup, or None.
        new_session: Start a new session (process group) for the tree.
        budget_probe: Returns the workspace's current usage in bytes (for the write budget and
            the workspace quota, ``limits.workspace_bytes``: the tree ends once the usage
            passes it, whatever the tree's own share).
        shared_quota: ``(probe, limit)``: the usage of the sandbox's shared quota
            (:class:`~sagents.sandbox.SharedQuota`) and its bytes; the tree ends once the usage
            passes it, as for the workspace quota.
        budget_device: ``st_dev`` of the workspace: files on it that the tree unlinked but still
            holds open or mapped count against the write budget too.
        helpers: ``prlimit`` and ``setpriv`` for the spawn way (see
            :mod:`sagents.sandbox._launcher`); None forks with a ``preexec_fn``.
    """

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str
    fd_map: Mapping[int, int] = field(default_factory=dict)
    stdin: str | int = "devnull"
    stdout: str | int = "pipe"
    stderr: str | int = "pipe"
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    cgroup: Cgroup | None = None
    new_session: bool = True
    budget_probe: Callable[[], int] | None = None
    shared_quota: tuple[Callable[[], int], int] | None = None
    budget_device: int | None = None
    helpers: tuple[str, str | None] | None = None


class _Usage(NamedTuple):
    """What a tree's watchdog measured, in bytes."""

    workspace: int  # the workspace and its logs, with the unlinked files the tree holds
    shared: int  # the same with the shared quota's other directories (0 without one)


class _PipeReceiveStream(anyio.abc.ByteReceiveStream):
    """A non-blocking pipe read end, drained with ``anyio.wait_readable``."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._closed = False

    async def receive(self, max_bytes: int = READ_CHUNK_BYTES) -> bytes:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._fd)  # wake a task still waiting on it
            os.close(self._fd)


class _PipeSendStream(anyio.abc.ByteSendStream):
    """A non-blocking pipe write end."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._closed = False

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except BrokenPipeError:
                raise anyio.BrokenResourceError from None
            view = view[written:]

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._fd)  # wake a task still waiting on it
            os.close(self._fd)


class LocalProcess:
    """A running sandboxed process tree on this host.

    Attributes:
        pid: The launcher's pid (bwrap's, or the program's for ``passthrough``).
        stdin: Write end of the child's stdin, when ``stdin="pipe"``.
        stdout: Read end of the child's stdout, when ``stdout="pipe"``.
        stderr: Read end of the child's stderr, when ``stderr="pipe"``.
        returncode: Exit status once reaped (``-N`` for signal N), else None.
        killed_reason: Why the sandbox ended it, if it did.
    """

    def __init__(self, child: Child, spec: ProcessSpec) -> None:
        self._child = child
        self._spec = spec
        self.pid = child.pid
        self.stdin: anyio.abc.ByteSendStream | None = None
        self.stdout: anyio.abc.ByteReceiveStream | None = None
        self.stderr: anyio.abc.ByteReceiveStream | None = None
        self.returncode: int | None = None
        self.killed_reason: KillReason | None = None
        self._exited = anyio.Event()
        self._poke = anyio.Event()  # wakes the watchdog: exit, or a new write-budget baseline
        self._rebase = False
        self._scan_error: int | None = None  # errno of the failing scans, while they fail
        self._pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            self._pidfd = os.pidfd_open(child.pid)

    async def _reap(self) -> None:
        if self._pidfd is not None:
            try:
                await anyio.wait_readable(self._pidfd)
            finally:
                os.close(self._pidfd)
                self._pidfd = None
            self.returncode = self._child.reap()  # exited: does not block
        else:
            self.returncode = await anyio.to_thread.run_sync(
                self._child.reap, abandon_on_cancel=True
            )
        self._exited.set()
        self._poke.set()

    def _disk_usage(self) -> _Usage:
        """The workspace's usage plus the unlinked files the tree still holds, and the same
        for the shared quota (blocking)."""
        probe = self._spec.budget_probe
        used = probe() if probe is not None else 0
        device = self._spec.budget_device
        held = 0
        if device is not None:
            cgroup = self._spec.cgroup
            pids = cgroup.pids() if cgroup is not None else tree_pids(self.pid)
            held = held_unlinked_bytes(pids, device)
        shared = self._spec.shared_quota
        return _Usage(used + held, shared[0]() + held if shared is not None else 0)

    def _over(self, usage: _Usage, baseline: int) -> KillReason | None:
        """Why a tree whose disk ``usage`` it is (``baseline`` bytes when it started) must end."""
        limits = self._spec.limits
        used = usage.workspace
        if limits.workspace_bytes is not None and used > limits.workspace_bytes:
            return "workspace_quota"
        shared = self._spec.shared_quota
        if shared is not None and usage.shared > shared[1]:
            return "workspace_quota"  # the quota the workspace shares (the principal's)
        if limits.write_budget_bytes is not None and used - baseline > limits.write_budget_bytes:
            return "write_budget"
        return None

    async def _measure(self) -> _Usage | None:
        """The tree's disk usage; None when it cannot be measured now (logged)."""
        try:
            used = await anyio.to_thread.run_sync(self._disk_usage)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                logger.warning(
                    "the workspace of sandboxed process %d is gone (%s): its write budget is "
                    "no longer measured",
                    self.pid,
                    error,
                )
                raise _WorkspaceGone from error
            if self._scan_error != error.errno:
                logger.warning(
                    "cannot measure the disk use of sandboxed process %d (%s); retrying",
                    self.pid,
                    error,
                )
            self._scan_error = error.errno
            return None
        if self._scan_error is not None:
            logger.warning("the disk use of sandboxed process %d is measured again", self.pid)
            self._scan_error = None
        return used

    async def _watch(self, timeout: float | None) -> None:  # noqa: ASYNC109 (internal)
        deadline = anyio.current_time() + timeout if timeout is not None else None
        try:
            await self._watch_tree(deadline, measure=True)
        except _WorkspaceGone:
            await self._watch_tree(deadline, measure=False)  # the wall-clock timeout still holds

    async def _watch_tree(self, deadline: float | None, *, measure: bool) -> None:
        probe = self._spec.budget_probe if measure else None
        limits = self._spec.limits
        # anything to measure?
        budget = limits.write_budget_bytes or limits.workspace_bytes or self._spec.shared_quota
        interval = WATCHDOG_POLL_SECONDS
        baseline: int | None = 0
        if probe and budget:
            started = anyio.current_time()
            first = await self._measure()  # None: the first scan that works is the baseline
            baseline = first.workspace if first is not None else None
            interval = watchdog_interval(anyio.current_time() - started)
        while not self._exited.is_set():
            wait_for = interval if probe and budget else None
            if deadline is not None:
                left = deadline - anyio.current_time()
                wait_for = left if wait_for is None else min(wait_for, left)
            with anyio.move_on_after(wait_for):
                await self._poke.wait()
            if self._exited.is_set():
                return
            if self._poke.is_set():
                self._poke = anyio.Event()
            if self._rebase and probe and budget:
                self._rebase = False
                now = await self._measure()
                baseline = now.workspace if now is not None else None
                if now is not None and self._over(now, now.workspace) is not None:
                    await self.kill("workspace_quota")  # a spare, after the quota went
                    return
                continue
            if deadline is not None and anyio.current_time() >= deadline:
                await self.kill("timeout")
                return
            if probe and budget:
                started = anyio.current_time()
                usage = await self._measure()
                took = anyio.current_time() - started
                interval = watchdog_interval(took)
                if usage is None:
                    continue
                if baseline is None:
                    baseline = usage.workspace  # the first scan that worked (quotas hold from it)
                reason = self._over(usage, baseline)
                if reason is not None:
                    await self.kill(reason)
                    return

    def restart_write_budget(self) -> None:
        """Count the write budget from now on: the watchdog measures a new baseline at once (a
        tree started ahead of its work, such as run_script's spare, is not charged for what
        others wrote to the workspace while it waited)."""
        self._rebase = True
        self._poke.set()

    def signal_tree(self) -> None:
        """SIGKILL what is left of the tree once (launcher, process group, cgroup) without
        waiting for it to go; :meth:`wait_tree_gone` waits, and leaving :func:`open_process`
        still kills until the cgroup is empty."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        if self._spec.new_session:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self._spec.cgroup is not None:
            self._spec.cgroup.signal_all()

    async def wait_tree_gone(self) -> None:
        """Wait, without blocking the event loop, until every process of the tree's cgroup has
        exited (through a pidfd of each: a kernel signal); without a cgroup, only the launcher.
        Unbounded: the caller bounds it, after :meth:`signal_tree`."""
        await self._exited.wait()
        cgroup = self._spec.cgroup
        for _ in range(KILL_ROUNDS_ASYNC):
            pids = cgroup.pids() if cgroup is not None else []
            if not pids:
                return
            for pid in pids:
                try:
                    pidfd = os.pidfd_open(pid)
                except (OSError, AttributeError):  # gone already, or no pidfd here
                    continue
                try:
                    await anyio.wait_readable(pidfd)
                finally:
                    os.close(pidfd)

    async def wait(self) -> int:
        """Wait until the launcher exits; return its status (``-N`` for signal N)."""
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def kill_tree_now(self) -> None:
        """SIGKILL the whole tree at once: launcher, process group and cgroup."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)  # bwrap: its pid-1 child dies with it
        if self._spec.new_session:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self._spec.cgroup is not None:
            self._spec.cgroup.kill_all()

    async def kill(self, reason: KillReason = "killed") -> None:
        """End the whole process tree and reap the launcher (bounded, shielded)."""
        if self.killed_reason is None and self.returncode is None:
            self.killed_reason = reason
        with anyio.CancelScope(shield=True):
            self.kill_tree_now()
            with anyio.move_on_after(KILL_REAP_SECONDS):
                # Reap here too: the reaper task may already be cancelled with its owner.
                code = await anyio.to_thread.run_sync(self._child.reap, abandon_on_cancel=True)
                self.returncode = code
                self._exited.set()


class _WorkspaceGone(Exception):
    """The watched tree's workspace was removed: nothing is left to measure."""


def watchdog_interval(scan_seconds: float) -> float:
    """Seconds to wait before the next write-budget scan, given the last scan's duration:
    ``WATCHDOG_SCAN_SHARE`` times it (scanning a huge workspace costs under 10% of a core),
    at least ``WATCHDOG_POLL_SECONDS`` and at most ``WATCHDOG_MAX_INTERVAL_SECONDS`` (so
    what a tree can write unmeasured is bounded by its write rate times this interval plus
    one scan).

    Raises:
        ValueError: for a negative duration.
    """
    if scan_seconds < 0:
        raise ValueError(f"scan_seconds must be >= 0, got {scan_seconds!r}")
    share = WATCHDOG_SCAN_SHARE * scan_seconds
    return min(WATCHDOG_MAX_INTERVAL_SECONDS, max(WATCHDOG_POLL_SECONDS, share))


def _stdio(value: str | int, *, child_reads: bool) -> tuple[int, int | None, bool]:
    """Return ``(child fd, our fd or None, whether we must close the child fd after fork)``."""
    if value == "pipe":
        r, w = os.pipe()
        return (r, w, True) if child_reads else (w, r, True)
    if value == "devnull":
        return os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC), None, True
    if isinstance(value, int) and not isinstance(value, bool):
        return value, None, False
    raise ValueError(f"unsupported stdio value {value!r}")


@asynccontextmanager
async def open_process(
    spec: ProcessSpec,
    *,
    timeout: float | None,  # noqa: ASYNC109
    cgroup_owned: Cgroup | None = None,
) -> AsyncIterator[LocalProcess]:
    """Start ``spec`` and yield the running :class:`LocalProcess`.

    The process tree is watched (wall ``timeout`` in seconds, write budget) while the context is
    open; on exit, whatever is left of the tree is killed and reaped, the cgroup removed, and
    the pipes closed. Leaving the context by cancellation records ``killed_reason="cancelled"``.

    Args:
        spec: What to start.
        timeout: Wall-clock seconds before the tree is killed, or None.
        cgroup_owned: ``spec.cgroup`` when this function should remove it at the end (also
            when starting fails).

    Raises:
        SandboxError: when the launcher cannot be started.
    """
    streams: list[tuple[int, int | None, bool]] = [_stdio(spec.stdin, child_reads=True)]
    streams.append(_stdio(spec.stdout, child_reads=False))
    if spec.stderr == "stdout":
        streams.append((streams[1][0], None, False))
    else:
        streams.append(_stdio(spec.stderr, child_reads=False))
    procs_files = [f"{d}/cgroup.procs" for d in spec.cgroup.dirs] if spec.cgroup else []
    try:
        # Started from the event-loop thread on purpose: PDEATHSIG follows the starting thread.
        child = start_child(
            spec.argv,
            env=spec.env,
            cwd=spec.cwd,
            fds={0: streams[0][0], 1: streams[1][0], 2: streams[2][0], **spec.fd_map},
            procs_files=procs_files,
            limits=spec.limits,
            new_session=spec.new_session,
            helpers=spec.helpers,
            low_priority=spec.limits.cpu_cores is not None
            and not (spec.cgroup is not None and spec.cgroup.cpu_limited),
        )
    except BaseException as exc:
        for _, ours, _ in streams:
            if ours is not None:
                os.close(ours)
        if cgroup_owned is not None:
            cgroup_owned.remove()
        if isinstance(exc, OSError | subprocess.SubprocessError):
            reason = getattr(exc, "strerror", None) or exc
            raise SandboxError(f"cannot start {spec.argv[0]!r}: {reason}") from exc
        raise
    finally:
        for fd, _, close in streams:
            if close:
                os.close(fd)
    proc = LocalProcess(child, spec)
    if streams[0][1] is not None:
        proc.stdin = _PipeSendStream(streams[0][1])
    if streams[1][1] is not None:
        proc.stdout = _PipeReceiveStream(streams[1][1])
    if streams[2][1] is not None:
        proc.stderr = _PipeReceiveStream(streams[2][1])
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(proc._reap)
            tg.start_soon(proc._watch, timeout)
            try:
                yield proc
            except BaseException as exc:
                cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                await proc.kill("cancelled" if cancelled else "killed")
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    if proc.returncode is None:
                        await proc.kill("killed")
                    proc.kill_tree_now()  # leftovers of a tree whose launcher exited
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()
            if spec.cgroup is not None:
                spec.cgroup.kill_all()
            if cgroup_owned is not None:
                cgroup_owned.remove()
