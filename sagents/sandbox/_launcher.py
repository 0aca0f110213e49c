"""Forking the launcher of a process tree (a leaf that touches the OS).

Before the launcher (bubblewrap, or the program itself for ``passthrough``) runs, the new
process must, in this order and with no window for a race: enter the tree's cgroup, set its
rlimits, get the descriptors it was given on purpose at their fixed numbers (run_script's 3
and 4), and hold no other inheritable descriptor. Two ways do that:

- **spawn** (preferred): ``os.posix_spawn`` (vfork: fast, does not block the event loop, safe
  with threads) of ``/bin/sh``, which writes its own pid into ``cgroup.procs``, ``cd``s and
  execs ``prlimit`` (util-linux), which sets the rlimits and execs the launcher. Descriptors are
  placed by the spawn's file actions.
- **fork** (fallback where ``prlimit`` is missing): ``subprocess.Popen`` with a ``preexec_fn``
  that does the same in Python in the forked child.

With ``low_priority`` (a CPU limit that no cgroup enforces) the launcher runs under
``SCHED_IDLE`` (``chrt --idle`` in the spawn way, the ``preexec_fn`` otherwise): the tree then
gets a core only when nothing else wants it, and cannot leave that policy (that needs
``CAP_SYS_NICE``).

The parent death signal (SIGKILL when the forking thread ends) is set by ``setpriv`` or the
``preexec_fn``; processes are therefore started from the event-loop thread, never from a
worker thread that may exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import resource
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence

from sagents.sandbox._types import SandboxLimits

__all__ = ["Child", "find_helpers", "start_child"]

_PR_SET_PDEATHSIG = 1
_HELPER_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
# $1: working directory; then cgroup.procs files up to "--"; then the command.
_LAUNCH_SCRIPT = (
    'cd -- "$1" || exit 126; unset PWD OLDPWD; shift; '
    'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'
)
_PRLIMIT_OPTIONS = {
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_CPU: "--cpu",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_NOFILE: "--nofile",
    resource.RLIMIT_NPROC: "--nproc",
    resource.RLIMIT_CORE: "--core",
}


class Child:
    """A started launcher process: its pid and a thread-safe, idempotent blocking reap."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        self.pid = pid
        self._popen = popen  # kept so that subprocess never reaps it behind our back
        self._lock = threading.Lock()
        self._code: int | None = None

    def reap(self) -> int:
        """Wait for the exit (blocking) and return the status, ``-N`` for signal N."""
        with self._lock:
            if self._code is None:
                if self._popen is not None:
                    self._code = self._popen.wait()
                else:
                    self._code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            return self._code


def find_helpers() -> tuple[str, str | None] | None:
    """Return ``(prlimit, setpriv or None)`` for the spawn way, or None to fall back."""
    prlimit = shutil.which("prlimit", path=_HELPER_PATH)
    if prlimit is None or not os.path.exists("/bin/sh"):
        return None
    return prlimit, shutil.which("setpriv", path=_HELPER_PATH)


def _idle_command() -> list[str]:
    """The command prefix that runs the rest under ``SCHED_IDLE`` (util-linux ``chrt``), or at
    the lowest priority (coreutils ``nice``) where ``chrt`` is missing. glibc's ``posix_spawn``
    accepts no ``SCHED_IDLE`` policy, so it cannot be a spawn attribute."""
    chrt = shutil.which("chrt", path=_HELPER_PATH)
    if chrt is not None:
        return [chrt, "--idle", "0"]
    nice = shutil.which("nice", path=_HELPER_PATH)
    return [nice, "-n", "19"] if nice is not None else []


def _user_process_count() -> int:
    """Processes of our real uid (RLIMIT_NPROC counts them all, not just the sandbox's)."""
    uid = os.getuid()
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(f"/proc/{name}").st_uid == uid
    return count


def _rlimits(limits: SandboxLimits) -> list[tuple[int, int]]:
    nproc = limits.processes
    if nproc is not None:
        # Root ignores RLIMIT_NPROC (the pids cgroup binds instead); for other users the limit
        # counts every process of the uid, so it is set above what already runs.
        nproc = None if os.geteuid() == 0 else nproc + _user_process_count()
    pairs = [
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_CORE, 0),
    ]
    return [(which, value) for which, value in pairs if value is not None]


def _inheritable_fds(keep: set[int]) -> list[int]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        with contextlib.suppress(OSError):  # the listing's own descriptor is already closed
            if fd >= 3 and fd not in keep and os.get_inheritable(fd):
                found.append(fd)
    return found


def _spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    fds: Mapping[int, int],
    procs_files: Sequence[str],
    limits: SandboxLimits,
    new_session: bool,
    helpers: tuple[str, str | None],
    low_priority: bool,
) -> Child:
    prlimit, setpriv = helpers
    command = [prlimit, *(f"{_PRLIMIT_OPTIONS[w]}={v}" for w, v in _rlimits(limits)), "--"]
    if low_priority:
        command = [*_idle_command(), *command]
    if setpriv is not None:
        command = [setpriv, "--pdeathsig", "KILL", "--", *command]
    sh_argv = ["/bin/sh", "-c", _LAUNCH_SCRIPT, "sagents-launch", cwd, *procs_files, "--"]
    floor = max(fds) + 1
    temps = {target: fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, floor) for target, src in fds.items()}
    try:
        actions: list[tuple[int, ...]] = [
            (os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds(set(fds))
        ]
        actions += [(os.POSIX_SPAWN_DUP2, temp, target) for target, temp in temps.items()]
        pid = os.posix_spawn(
            "/bin/sh",
            [*sh_argv, *command, *argv],
            dict(env),
            file_actions=actions,
            setsid=new_session,
        )
    finally:
        for temp in temps.values():
            os.close(temp)
    return Child(pid)


def _make_preexec(
    fd_map: Mapping[int, int],
    cgroup_fds: Sequence[int],
    rlimits: Sequence[tuple[int, int]],
    low_priority: bool,
) -> Callable[[], None]:
    """The function the forked child runs before exec: only os calls."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    targets = sorted(fd_map)
    top = (targets[-1] + 1) if targets else 3
    sources = [fd_map[t] for t in targets]

    def preexec() -> None:
        pid = str(os.getpid()).encode()
        for fd in cgroup_fds:
            os.write(fd, pid)  # enter the cgroup before anything else can fork
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        temps = [fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, top) for src in sources]
        for target, temp in zip(targets, temps, strict=True):
            os.dup2(temp, target, inheritable=True)
        # Close-on-exec descriptors vanish at exec; keeping them open until then keeps
        # subprocess's error pipe, so a failed exec is still reported as an OSError.
        for fd in _inheritable_fds(set(range(top))):
            with contextlib.suppress(OSError):
                os.close(fd)
        for which, value in rlimits:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(which, (value, value))
        if low_priority:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))

    return preexec


def _fork(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    fds: Mapping[int, int],
    cgroup_fds: Sequence[int],
    limits: SandboxLimits,
    new_session: bool,
    low_priority: bool,
) -> Child:
    extra = {target: src for target, src in fds.items() if target >= 3}
    popen = subprocess.Popen(
        list(argv),
        stdin=fds[0],
        stdout=fds[1],
        stderr=fds[2],
        cwd=cwd,
        env=dict(env),
        close_fds=False,  # the preexec function closes everything but the mapped fds
        preexec_fn=_make_preexec(extra, cgroup_fds, _rlimits(limits), low_priority),
        start_new_session=new_session,
    )
    return Child(popen.pid, popen)


def start_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    fds: Mapping[int, int],
    procs_files: Sequence[str],
    limits: SandboxLimits,
    new_session: bool,
    helpers: tuple[str, str | None] | None,
    low_priority: bool = False,
) -> Child:
    """Start ``argv`` as described in the module docstring.

    Args:
        argv: The launcher and its arguments (the program must exist: with the spawn way a
            missing program shows as exit status 127, not as an exception).
        env: Its complete environment.
        cwd: Its working directory on the host.
        fds: ``{number in the child: descriptor here}``: 0, 1, 2 and the extra ones, dense.
        procs_files: ``cgroup.procs`` files to enter before anything runs.
        limits: The rlimits to set.
        new_session: Start a new session (and process group).
        helpers: :func:`find_helpers`'s answer; None forks with a ``preexec_fn`` instead.
        low_priority: Start it under ``SCHED_IDLE`` (a CPU limit no cgroup enforces).

    Raises:
        OSError, subprocess.SubprocessError: when the process cannot be started.
    """
    if helpers is not None:
        return _spawn(
            argv,
            env=env,
            cwd=cwd,
            fds=fds,
            procs_files=procs_files,
            limits=limits,
            new_session=new_session,
            helpers=helpers,
            low_priority=low_priority,
        )
    cgroup_fds = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in procs_files]
    try:
        return _fork(
            argv,
            env=env,
            cwd=cwd,
            fds=fds,
            cgroup_fds=cgroup_fds,
            limits=limits,
            new_session=new_session,
            low_priority=low_priority,
        )
    finally:
        for fd in cgroup_fds:
            os.close(fd)
