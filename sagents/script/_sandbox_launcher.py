"""The sandbox :class:`~sagents.script._launcher.Launcher`: run_script on ``Sandbox.spawn``
(docs/sandbox.md, "spawn, for run_script").

Inside bubblewrap the script sees: the runtime directory (bootstrap, helper, protocol) bound
read-only at :data:`RUNTIME_MOUNT`, the workspace at the sandbox's workspace path (read-write,
or read-only in ``read_only`` mode), ``.agent/`` read-only in every mode, exactly fds 0-4, no
network, a private ``/tmp`` and its own PID namespace. Killing the tree (timeout, cancel,
output cap) goes through :meth:`SandboxProcess.kill`, which ends the PID namespace, the cgroup
and the process group, so a grandchild that called ``setsid`` dies too.

Exit statuses: bubblewrap reports a child killed by signal ``N`` as ``128 + N``; this launcher
turns that back into ``-N`` so the runner reports ``killed`` (a memory-cgroup OOM kill is
``-9``). A script that itself exits with 129-192 is reported the same way; the records keep
its output. A tree the sandbox ended for its write budget is ``-9`` as well.

Entered (``async with launcher:``, as :class:`~sagents.script._session.RunScriptTool` does for
its session), the launcher hosts each run's sandbox in a task of its own, and keeps one **spare**
(docs/run_script.md, "Spare sandboxes"): after a run's sandbox is gone, it starts the next one
(fresh namespaces, a fresh cgroup, the interpreter started and the helper loaded) waiting on
fd 3 for its run, so the next run only hands over its script path, variables and pipes. A spare
serves one run, is keyed by what it was started with (sandbox and its parameters, workspace,
read-only mode, the runtime's files, which directories the workspace and its read-only
sub-paths are; a spare whose key no longer matches is dropped), ends after
:data:`SPARE_IDLE_S` unused, and is killed when the launcher exits. The wait for a finished
run's tree to go (the kernel tearing its namespaces down) and the removal of its cgroup happen in
that task, after the run's result. Not entered, each run's sandbox is started and torn down in
the run's own task, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from anyio.abc import ByteReceiveStream

from sagents.core._lifespan import Lifespan
from sagents.errors import QuotaExceededError, SandboxError
from sagents.sandbox._local import LocalSandbox
from sagents.sandbox._process import LocalProcess
from sagents.sandbox._protocol import Sandbox, SandboxProcess
from sagents.sandbox._types import ReadOnlyBind
from sagents.script._launcher import LaunchSpec, ScriptProcess
from sagents.script._protocol import FDS_ENV
from sagents.script._runtime import bootstrap_argv

__all__ = [
    "RUNTIME_MOUNT",
    "SPARE_ARG",
    "SPARE_IDLE_S",
    "TREE_GONE_TIMEOUT_S",
    "HostedScriptProcess",
    "SandboxLauncher",
    "SandboxScriptProcess",
]

logger = logging.getLogger(__name__)

RUNTIME_MOUNT = "/opt/sagents/script-runtime"
"""Where the runtime directory appears inside bubblewrap (read-only)."""
SPARE_ARG = "--spare"
"""The bootstrap's argument, instead of a script, that makes it a spare (see the bootstrap)."""
SPARE_IDLE_S = 120.0  # a spare unused this many seconds is ended (the next run starts cold)
TREE_GONE_TIMEOUT_S = 10.0  # bound on waiting, after a run, for its tree to have exited

_MAX_SIGNAL = 64


def _exit_code(process: SandboxProcess, code: int, *, isolated: bool) -> int:
    if process.killed_reason == "write_budget":
        return -int(signal.SIGKILL)
    if isolated and 128 < code <= 128 + _MAX_SIGNAL:
        return -(code - 128)
    return code


@dataclass(kw_only=True)
class SandboxScriptProcess:
    """A :class:`~sagents.script._launcher.ScriptProcess` over a :class:`SandboxProcess`.

    Attributes:
        process: The sandbox's process (bubblewrap's, for ``local``).
        isolated: True when bubblewrap runs it (exit codes ``128+N`` mean signal ``N``).
        stack: Holds the ``spawn`` context; :meth:`aclose` leaves it (in the task that launched).
    """

    process: SandboxProcess
    isolated: bool
    stack: AsyncExitStack

    @property
    def stdout(self) -> ByteReceiveStream:
        """The script's standard output."""
        assert self.process.stdout is not None
        return self.process.stdout

    @property
    def stderr(self) -> ByteReceiveStream:
        """The script's standard error."""
        assert self.process.stderr is not None
        return self.process.stderr

    async def wait(self) -> int:
        """Wait for the exit; ``-N`` when signal ``N`` (or the sandbox) ended the script."""
        return _exit_code(self.process, await self.process.wait(), isolated=self.isolated)

    async def kill_tree(self) -> None:
        """End the whole tree (PID namespace, cgroup, process group) and reap it."""
        await self.process.kill("killed")

    async def aclose(self) -> None:
        """Leave the ``spawn`` context: kill what is left, close the pipes, free the cgroup."""
        await self.stack.aclose()


@dataclass(eq=False, kw_only=True)
class _Hosted:
    """One sandbox process whose ``spawn`` context lives in a task of the launcher."""

    key: tuple[Any, ...]
    spare: bool
    process: SandboxProcess | None = None
    control: socket.socket | None = None  # the host's end of a spare's hand-over socket
    taken: bool = False  # a run has it (a spare handed over, or a run's own)
    ended: bool = False  # its task is leaving (or left) the spawn context
    ready: anyio.Event = field(default_factory=anyio.Event)  # a spare's guest is waiting
    wake: anyio.Event = field(default_factory=anyio.Event)  # taken, or dropped
    released: anyio.Event = field(default_factory=anyio.Event)  # its run is done with it


@dataclass(kw_only=True)
class HostedScriptProcess:
    """A :class:`~sagents.script._launcher.ScriptProcess` whose sandbox a launcher's task hosts:
    :meth:`aclose` hands it back, and the task tears it down after the run's result."""

    hosted: _Hosted
    isolated: bool

    @property
    def process(self) -> SandboxProcess:
        """The sandbox's process."""
        assert self.hosted.process is not None
        return self.hosted.process

    @property
    def stdout(self) -> ByteReceiveStream:
        """The script's standard output."""
        assert self.process.stdout is not None
        return self.process.stdout

    @property
    def stderr(self) -> ByteReceiveStream:
        """The script's standard error."""
        assert self.process.stderr is not None
        return self.process.stderr

    async def wait(self) -> int:
        """Wait for the exit; ``-N`` when signal ``N`` (or the sandbox) ended the script."""
        return _exit_code(self.process, await self.process.wait(), isolated=self.isolated)

    async def kill_tree(self) -> None:
        """End the whole tree. Once the script has exited, what is left gets SIGKILL without
        waiting for the kernel to tear the namespaces down: the hosting task waits for that."""
        process = self.process
        if isinstance(process, LocalProcess) and process.returncode is not None:
            process.signal_tree()
        else:
            await process.kill("killed")

    async def aclose(self) -> None:
        """Hand the sandbox back to its task (which kills what is left and frees the cgroup)."""
        self.hosted.released.set()


def _relative_script(spec: LaunchSpec) -> tuple[str, str]:
    """``(real host workspace, script path relative to it)``; raises SandboxError outside."""
    host_ws = os.path.realpath(spec.workspace)
    script_rel = os.path.relpath(os.path.realpath(spec.script), host_ws)
    if script_rel.startswith(".."):
        raise SandboxError(f"the script {spec.script} is not inside the workspace")
    return host_ws, script_rel


def _identities(host_ws: str, subpaths: tuple[str, ...]) -> tuple[Any, ...]:
    """Which directories the workspace and its read-only sub-paths are (device, inode): a
    spare binds the directories it was started with, so one replaced at the same path since
    (removed and made again) needs a fresh spare."""
    found: list[Any] = []
    for path in (host_ws, *(os.path.join(host_ws, sub) for sub in subpaths)):
        try:
            info = os.stat(path)
        except OSError:
            found.append(None)
        else:
            found.append((info.st_dev, info.st_ino))
    return tuple(found)


def _runtime_state(spec: LaunchSpec) -> tuple[Any, ...]:
    """What identifies the runtime's files (a refreshed helper needs a fresh spare)."""
    state: list[Any] = [str(spec.bootstrap)]
    for path in sorted(spec.bootstrap.parent.glob("*.py")):
        with_stat = path.stat()
        state.append((path.name, with_stat.st_ino, with_stat.st_mtime_ns, with_stat.st_size))
    return tuple(state)


class SandboxLauncher(Lifespan):
    """Starts run_script's bootstrap inside a :class:`~sagents.sandbox.Sandbox`.

    Args:
        sandbox: The session's sandbox (``local``: bubblewrap; ``passthrough``: no isolation,
            only when asked for by name). It must support ``spawn`` and run Python.
        timeout_s: The sandbox's own wall-clock bound per run, in seconds; give it a little more
            than ``scripts.timeoutSec`` so the runner's timeout fires first. None: the
            sandbox's ``wall_timeout_seconds``.
        spare_idle_s: Seconds a spare may wait for a run (entered launchers only); None keeps
            no spare (runs' sandboxes are still hosted and torn down after their result).

    Raises:
        SandboxError: when the sandbox cannot spawn or has no Python.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        timeout_s: float | None = None,
        spare_idle_s: float | None = SPARE_IDLE_S,
    ) -> None:
        info = sandbox.describe()
        if not info.supports_spawn or info.python is None:
            raise SandboxError(
                f"the {info.kind!r} sandbox cannot run scripts (no spawn or no Python)",
                hint="run_script needs the 'local' sandbox (bubblewrap)",
            )
        if spare_idle_s is not None and spare_idle_s <= 0:
            raise ValueError(f"spare_idle_s must be positive or None, got {spare_idle_s!r}")
        self._sandbox = sandbox
        self._read_only: Sandbox | None = sandbox if info.mode == "read_only" else None
        self._timeout_s = timeout_s
        self._spare_idle_s = spare_idle_s
        self._tg: anyio.abc.TaskGroup | None = None
        self._hosted: set[_Hosted] = set()
        self._spare: _Hosted | None = None
        self._last: tuple[Sandbox, LaunchSpec] | None = None  # what the next spare is for
        self._closing = False
        self._changed = anyio.Event()  # set (and replaced) whenever the spare changes
        self.spares_started = 0
        """Spares started so far (for tests and figures)."""
        self.spares_used = 0
        """Runs that got a spare."""

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox scripts run in."""
        return self._sandbox

    # -- lifecycle ------------------------------------------------------------------------------

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        """Host the sandboxes in one task group; on leaving, kill the spare and every sandbox
        still hosted and wait for their teardown (bounded)."""
        self._closing = False
        # Each task's teardown is shielded and bounded (the sandbox's own kill, then at most
        # TREE_GONE_TIMEOUT_S for the tree to go): leaving the group waits for them.
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._closing = True
                self._spare = None
                for hosted in list(self._hosted):
                    self._drop(hosted)
                self._tg = None

    def _drop(self, hosted: _Hosted) -> None:
        """End a hosted sandbox: a spare nobody took, or one whose run is gone."""
        _close_control(hosted)
        hosted.wake.set()
        hosted.released.set()

    @property
    def spare_process(self) -> SandboxProcess | None:
        """The spare's sandbox process, while there is one."""
        return self._spare.process if self._spare is not None else None

    async def spare_ready(self) -> None:
        """Wait until a spare is ready for the next run (its guest imported and waiting).
        Unbounded: the caller bounds it."""
        while self._spare is None or not self._spare.ready.is_set():
            await self._changed.wait()

    # -- launching ----------------------------------------------------------------------------

    def _sandbox_for(self, read_only: bool) -> Sandbox:
        if not read_only:
            return self._sandbox
        if self._read_only is None:
            base = self._sandbox
            if not isinstance(base, LocalSandbox):
                raise SandboxError(
                    "read_only mode needs a read-only sandbox for scripts",
                    hint="build the session's sandbox with mode='read_only'",
                )
            params = dataclasses.replace(base.params, mode="read_only")
            self._read_only = LocalSandbox(params, isolated=base.isolated)
        return self._read_only

    def _key(self, sandbox: Sandbox, spec: LaunchSpec) -> tuple[Any, ...]:
        params = sandbox.params if isinstance(sandbox, LocalSandbox) else None
        host_ws = os.path.realpath(spec.workspace)
        subpaths = params.read_only_subpaths if params is not None else ()
        return (
            id(sandbox),
            params,
            host_ws,
            _identities(host_ws, subpaths),
            spec.read_only_workspace,
            _runtime_state(spec),
            self._timeout_s,
        )

    async def launch(self, spec: LaunchSpec, *, request_fd: int, reply_fd: int) -> ScriptProcess:
        """Start the bootstrap on ``spec.script`` with the pipes as fds 3 and 4 (see
        :class:`~sagents.script._launcher.Launcher`); entered, through the spare when one
        matches.

        Raises:
            SandboxError: the script is outside the workspace, or the sandbox cannot start it.
        """
        sandbox = self._sandbox_for(spec.read_only_workspace)
        info = sandbox.describe()
        host_ws, script_rel = _relative_script(spec)
        if isinstance(sandbox, LocalSandbox) and sandbox.host_workspace != host_ws:
            raise SandboxError(
                f"the sandbox's workspace {sandbox.host_workspace} is not the run's {host_ws}"
            )
        runtime_host = str(spec.bootstrap.parent)
        isolated = info.isolation == "bubblewrap"
        runtime_inside = RUNTIME_MOUNT if isolated else runtime_host
        workspace = info.workspace.rstrip("/")
        script_inside = f"{workspace}/{script_rel}"
        bootstrap_inside = f"{runtime_inside}/{spec.bootstrap.name}"
        binds = [ReadOnlyBind(host_path=runtime_host, sandbox_path=runtime_inside)]
        env = dict(spec.env)
        env[FDS_ENV] = "3,4"
        if self._tg is None:
            stack = AsyncExitStack()
            process = await stack.enter_async_context(
                sandbox.spawn(
                    bootstrap_argv(bootstrap_inside, script_inside, python=info.python),
                    cwd=workspace,
                    env=env,
                    extra_fds={3: request_fd, 4: reply_fd},
                    extra_ro_binds=binds,
                    timeout=self._timeout_s,
                )
            )
            return SandboxScriptProcess(process=process, isolated=isolated, stack=stack)
        key = self._key(sandbox, spec)
        self._last = (sandbox, spec)
        spare, self._spare = self._spare, None
        if spare is not None and isinstance(sandbox, LocalSandbox):
            # A spare started before the last run wrote its files: the quota is checked at
            # hand-over as a cold start checks it before it spawns.
            try:
                await sandbox.check_quota()
            except BaseException:
                self._drop(spare)
                raise
        if spare is not None:
            if spare.key == key and self._hand_over(
                spare, script_inside, spec, request_fd, reply_fd
            ):
                self.spares_used += 1
                return HostedScriptProcess(hosted=spare, isolated=isolated)
            self._drop(spare)
        hosted = _Hosted(key=key, spare=False, taken=True)
        await self._tg.start(
            self._host,
            hosted,
            sandbox,
            bootstrap_argv(bootstrap_inside, script_inside, python=info.python),
            workspace,
            env,
            {3: request_fd, 4: reply_fd},
            binds,
        )
        return HostedScriptProcess(hosted=hosted, isolated=isolated)

    def _hand_over(
        self, spare: _Hosted, script: str, spec: LaunchSpec, request_fd: int, reply_fd: int
    ) -> bool:
        """Give the spare its run (script path, variables, pipes); False when it is gone."""
        process = spare.process
        if (
            spare.ended
            or spare.control is None
            or process is None
            or process.returncode is not None
        ):
            return False
        fields = [script, *(f"{key}={value}" for key, value in spec.env.items())]
        if any("\0" in item for item in fields) or any("=" in key for key in spec.env):
            return False  # cannot be passed that way (nor in an environment): start cold
        message = "\0".join(fields).encode("utf-8", "surrogateescape")
        try:
            socket.send_fds(spare.control, [message], [request_fd, reply_fd])
        except OSError:  # it died meanwhile (EPIPE, ECONNRESET): start one cold
            return False
        # End of the message. Shut down, not closed: closing with the spare's "ready" byte
        # still unread would make the spare's read fail (ECONNRESET) before it got the run.
        with contextlib.suppress(OSError):  # sent: a spare gone since fails as the run
            spare.control.shutdown(socket.SHUT_WR)
        spare.taken = True
        spare.wake.set()
        if isinstance(process, LocalProcess):
            process.restart_write_budget()  # charge the run only for what it writes
        return True

    async def _host(
        self,
        hosted: _Hosted,
        sandbox: Sandbox,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        fds: dict[int, int],
        binds: list[ReadOnlyBind],
        *,
        task_status: anyio.abc.TaskStatus[_Hosted] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Own one sandbox process from spawn to teardown (a spare: until taken or dropped)."""
        timeout = self._timeout_s
        if hosted.spare and self._spare_idle_s is not None:
            if timeout is None and isinstance(sandbox, LocalSandbox):
                timeout = sandbox.params.limits.wall_timeout_seconds  # what a cold run gets
            if timeout is not None:  # counted from the spare's start: its idle time on top
                timeout += self._spare_idle_s  # the runner's own timeout ends a run first
        self._hosted.add(hosted)
        try:
            async with sandbox.spawn(
                argv, cwd=cwd, env=env, extra_fds=fds, extra_ro_binds=binds, timeout=timeout
            ) as process:
                hosted.process = process
                task_status.started(hosted)
                if hosted.spare:
                    with anyio.move_on_after(self._spare_idle_s):
                        await self._await_ready(hosted)
                        await hosted.wake.wait()
                    if not hosted.taken:
                        hosted.ended = True
                        if self._spare is hosted:
                            self._spare = None
                            self._notify()
                        return  # unused: leaving the context kills it
                await hosted.released.wait()
                hosted.ended = True
                if isinstance(process, LocalProcess):
                    process.signal_tree()
                    with anyio.move_on_after(TREE_GONE_TIMEOUT_S):
                        await process.wait_tree_gone()
        finally:
            hosted.ended = True
            self._hosted.discard(hosted)
            _close_control(hosted)
            if self._spare is hosted:
                self._spare = None
                self._notify()
        if hosted.taken and not self._closing and self._spare is None:
            await self._start_spare()

    async def _await_ready(self, hosted: _Hosted) -> None:
        """Wait for the spare's guest to say it is ready (one byte on the control socket)."""
        control = hosted.control
        if control is None:
            return
        try:
            await anyio.wait_readable(control)
            ready = control.recv(1) == b"R"
        except (anyio.ClosedResourceError, OSError):  # handed over or dropped meanwhile
            return
        if ready:
            hosted.ready.set()
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _start_spare(self) -> None:
        """Start the next run's spare, like the last run's sandbox (errors are only logged: the
        next run then starts cold and reports them)."""
        try:
            await self._spawn_spare()
        except OSError as error:  # its workspace or the runtime removed, no descriptor left
            logger.warning("no spare sandbox for the next run: %s", error)

    async def _spawn_spare(self) -> None:
        if self._spare_idle_s is None or self._last is None or self._tg is None:
            return
        sandbox, spec = self._last
        info = sandbox.describe()
        isolated = info.isolation == "bubblewrap"
        runtime_host = str(spec.bootstrap.parent)
        runtime_inside = RUNTIME_MOUNT if isolated else runtime_host
        argv = [
            *bootstrap_argv(
                f"{runtime_inside}/{spec.bootstrap.name}", SPARE_ARG, python=info.python
            )
        ]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        spare = _Hosted(key=self._key(sandbox, spec), spare=True, control=ours)
        try:
            await self._tg.start(
                self._host,
                spare,
                sandbox,
                argv,
                info.workspace.rstrip("/"),
                {},
                {3: theirs.fileno()},
                [ReadOnlyBind(host_path=runtime_host, sandbox_path=runtime_inside)],
            )
        except (SandboxError, QuotaExceededError, OSError) as error:
            ours.close()
            logger.info("no spare sandbox for the next run: %s", error)
            return
        finally:
            theirs.close()
        self.spares_started += 1
        if self._closing or self._spare is not None:
            self._drop(spare)
        else:
            self._spare = spare
            self._notify()


def _close_control(hosted: _Hosted) -> None:
    """Close the host's end of a spare's control socket (waking a task waiting on it)."""
    control, hosted.control = hosted.control, None
    if control is not None:
        anyio.notify_closing(control)
        control.close()
