"""The ``local`` (bubblewrap) and ``passthrough`` providers: programs run on this host.

``local`` isolates every process tree with bubblewrap (see :mod:`sagents.sandbox._bwrap`), a
per-tree cgroup where cgroups are writable, rlimits, and a watchdog for the write budget and
the workspace quota (``SandboxLimits.workspace_bytes``: the workspace and the background tasks'
logs together, checked before a program starts and measured while it runs).
``passthrough`` runs the same programs with the same environment allowlist, rlimits and cgroup
but *without any isolation*: only by explicit choice, with a warning in the log (docs/sandbox.md).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import replace

import anyio
import anyio.abc

from sagents.errors import (
    QuotaExceededError,
    SandboxError,
    TaskNotFoundError,
    TooManyTasksError,
)
from sagents.sandbox._background import BackgroundTask, drain_capped, read_log_range
from sagents.sandbox._bwrap import (
    build_bwrap_argv,
    find_bwrap,
    find_setpriv,
    identity_files,
    python_runtime,
)
from sagents.sandbox._cgroup import Cgroup, cgroup_support, create_cgroup
from sagents.sandbox._diskuse import directory_usage_bytes
from sagents.sandbox._egress import egress_proxy, guest_argv
from sagents.sandbox._hostfs import HostFiles, open_dir_fd, safe_open_in
from sagents.sandbox._identity import grant_workspace, sandbox_identity
from sagents.sandbox._launcher import find_helpers
from sagents.sandbox._network import network_policy
from sagents.sandbox._process import LocalProcess, ProcessSpec, open_process
from sagents.sandbox._seccomp import seccomp_filter
from sagents.sandbox._types import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CompletedRun,
    DirEntry,
    FileStat,
    ReadOnlyBind,
    ReadWriteBind,
    SandboxInfo,
    SandboxParams,
    TaskStatus,
)

__all__ = ["LocalSandbox"]

logger = logging.getLogger(__name__)

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"  # PATH inside
LAUNCHER_ENV = {"PATH": "/usr/bin:/bin"}  # bwrap's own environment (readable at /proc/1/environ)
DRAIN_GRACE_SECONDS = 5.0  # after the tree is gone, how long pipes may take to report EOF
_O_PATH_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
QUOTA_SETTING = "quotas.workspaceBytes"  # the gateway's key; errors name it and the field
TASKS_SETTING = "quotas.backgroundTasksPerSession"


class LocalSandbox:
    """A sandbox on this host: bubblewrap isolation (``isolated=True``) or none (passthrough).

    Args:
        params: Workspace, mode, limits, environment allowlist, extra binds.
        isolated: True for bubblewrap (``local``), False for ``passthrough``.

    Raises:
        SandboxUnavailableError: ``isolated`` and bubblewrap is missing or unusable; the hint
            says how to install it.
    """

    def __init__(self, params: SandboxParams, *, isolated: bool = True) -> None:
        self.params = params
        self.isolated = isolated
        self._bwrap = find_bwrap() if isolated else None
        created = not os.path.isdir(params.workspace)
        os.makedirs(params.workspace, exist_ok=True)
        self._host_workspace = os.path.realpath(params.workspace)
        self._workspace = params.workspace_path.rstrip("/") if isolated else self._host_workspace
        self._setpriv = find_setpriv() if isolated and os.geteuid() == 0 else None
        self._run_as = (
            sandbox_identity(self._host_workspace, params.sandbox_uid)
            if isolated and self._setpriv is not None
            else None
        )
        if self._run_as is not None and params.mode == "read_write":
            grant_workspace(self._host_workspace, self._run_as, created=created)
        for rw in params.extra_rw_binds:
            inside = rw.sandbox_path.rstrip("/")
            if isolated and (inside == self._workspace or inside.startswith(self._workspace + "/")):
                raise ValueError(
                    f"read-write bind {rw.sandbox_path!r} would lie in the workspace "
                    f"{self._workspace!r}: choose another path"
                )
            if self._run_as is not None and os.path.isdir(rw.host_path):
                grant_workspace(os.path.realpath(rw.host_path), self._run_as, created=False)
        self._files = HostFiles(
            self._host_workspace,
            self._workspace,
            writable=params.mode == "read_write",
            read_only_subpaths=params.read_only_subpaths,
            owner=self._run_as,
        )
        self._cgroups = cgroup_support()
        self._python = python_runtime()[1]
        self._helpers = find_helpers()
        self._seccomp = seccomp_filter() if isolated else None
        self._tasks: dict[str, BackgroundTask] = {}
        self._logs_dir: str | None = None
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        if not isolated:
            logger.warning(
                "passthrough sandbox for %r: programs run WITHOUT isolation (host files, "
                "network and processes are reachable)",
                self._host_workspace,
            )

    @property
    def host_workspace(self) -> str:
        """The workspace's real path on this host (for host-side writers such as run_script's
        records, which must open it with :func:`~sagents.sandbox.open_dir_fd` and write through
        :func:`~sagents.sandbox.safe_open_in`). Only local providers have one."""
        return self._host_workspace

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> LocalSandbox:
        self._stack = AsyncExitStack()
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        if self.params.logs_dir is None:
            self._logs_dir = tempfile.mkdtemp(prefix="sagents-tasks-")
        else:
            os.makedirs(self.params.logs_dir, mode=0o700, exist_ok=True)
            self._logs_dir = self.params.logs_dir
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Kill every background task, wait for them, and delete their logs."""
        with anyio.CancelScope(shield=True):
            for task in list(self._tasks.values()):
                if task.process is not None and task.process.returncode is None:
                    await task.process.kill("killed")
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()  # the task group: every task has been killed, so this is quick
        self._tg = None
        if self._logs_dir is not None:
            if self.params.logs_dir is None:
                shutil.rmtree(self._logs_dir, ignore_errors=True)
            else:  # a shared directory: remove only this sandbox's logs
                for task in self._tasks.values():
                    with suppress(FileNotFoundError):
                        os.unlink(task.log_path)
                with suppress(OSError):  # only once empty: another sandbox may share it
                    os.rmdir(self._logs_dir)
            self._logs_dir = None

    def describe(self) -> SandboxInfo:
        """Isolation level, cgroup use and the weaknesses of this configuration."""
        warnings: list[str] = []
        if not self.isolated:
            warnings.append(
                "passthrough: no isolation at all; programs see the host's files, network and "
                "processes, and read-only sub-paths are enforced only by the file API"
            )
        if self.isolated and self._seccomp is None:
            warnings.append(
                "no seccomp filter for this architecture: programs can create set-user-ID "
                "files in the workspace, owned by this host's user"
            )
        if self.isolated and os.geteuid() == 0 and self._run_as is None:
            why = (
                "sandbox_uid=0 was asked for"
                if self.params.sandbox_uid == 0
                else "setpriv (util-linux) is missing"
            )
            warnings.append(
                f"programs run as the host's root ({why}): file modes do not protect the "
                "host's files in the directories the sandbox binds"
            )
        policy = network_policy(self.params.network)
        if policy is not None and self.isolated:
            warnings.append(
                "network: programs reach, through the egress proxy (HTTP and HTTPS only), "
                f"what network.allow {list(policy.allow)!r} lets through"
            )
        if not self._cgroups.available:
            warnings.append(
                f"no cgroups ({self._cgroups.reason}): memory and process limits are per "
                "process only (RLIMIT_AS, RLIMIT_NPROC, which does not bind root), so a fork "
                "bomb or a many-process memory bomb is NOT contained"
            )
        if self.params.limits.cpu_cores is not None and not self._cgroups.cpu:
            warnings.append(
                "no writable cpu cgroup controller: the CPU limit is not a quota; programs run "
                "under SCHED_IDLE instead (CPU only when nothing else wants it)"
            )
        return SandboxInfo(
            kind="local" if self.isolated else "passthrough",
            isolation="bubblewrap" if self.isolated else "none",
            workspace=self._workspace,
            mode=self.params.mode,
            cgroups=self._cgroups.available,
            runs_programs=True,
            supports_spawn=True,
            python=self._python,
            limits=self.params.limits,
            warnings=tuple(warnings),
            uid=self._run_as[0] if self._run_as is not None else os.geteuid(),
        )

    # -- the workspace quota ------------------------------------------------------------------

    def usage_bytes(self) -> int:
        """What this sandbox makes the host store, in bytes: the workspace, the background
        tasks' logs and what ``params.charged_bytes`` says is kept for it elsewhere (the
        measure of the write budget and of ``limits.workspace_bytes``). Blocking: call it from
        a worker thread."""
        charged = self.params.charged_bytes
        return self._directories_usage() + (charged() if charged is not None else 0)

    def _directories_usage(self) -> int:
        """What the workspace and the background tasks' logs hold, in bytes (blocking)."""
        used = self._files.usage_bytes()
        logs = self._logs_dir
        if logs is not None and not _inside(logs, self._host_workspace):
            with suppress(FileNotFoundError):
                used += directory_usage_bytes(logs)
        return used

    def shared_usage_bytes(self) -> int:
        """What this sandbox and the other directories of its :class:`SharedQuota` hold
        together, in bytes (0 without a shared quota). Blocking: call it from a worker
        thread."""
        shared = self.params.shared_quota
        if shared is None:
            return 0
        if shared.charged_bytes is not None:  # the principal's charges, this sandbox's among them
            used = self._directories_usage() + shared.charged_bytes()
        else:
            used = self.usage_bytes()
        own = {os.path.realpath(self._host_workspace)}
        if self._logs_dir is not None:
            own.add(os.path.realpath(self._logs_dir))
        for path in shared.elsewhere():
            real = os.path.realpath(path)
            if real not in own:
                own.add(real)
                with suppress(FileNotFoundError, NotADirectoryError):
                    used += directory_usage_bytes(real)
        return used

    async def check_quota(self, adding: int = 0) -> None:
        """Refuse to start anything (or to write ``adding`` bytes more) once the workspace
        quota is used up.

        Raises:
            QuotaExceededError: the workspace (and the logs) hold the quota or more, or
                would with ``adding`` bytes more.
        """
        shared = self.params.shared_quota
        if shared is not None:
            together = await anyio.to_thread.run_sync(self.shared_usage_bytes)
            if together + adding >= shared.limit_bytes:
                more = f" and {adding:,} bytes more would not fit" if adding else ""
                raise QuotaExceededError(
                    f"the quota this workspace shares is used up: its workspaces, task logs "
                    f"and kept results hold {together:,} bytes of {shared.limit_bytes:,}{more} "
                    f"({shared.setting})",
                    hint=(
                        "remove files from this or another session's workspace, or ask the "
                        f"operator to raise {shared.setting}"
                    ),
                    details={
                        "limit": shared.setting,
                        "used_bytes": together,
                        "quota_bytes": shared.limit_bytes,
                    },
                )
        quota = self.params.limits.workspace_bytes
        if quota is None:
            return
        used = await anyio.to_thread.run_sync(self.usage_bytes)
        if used + adding >= quota:
            more = f" and {adding:,} bytes more would not fit" if adding else ""
            raise QuotaExceededError(
                f"the workspace quota is used up: the workspace, its task logs and "
                f"kept results hold "
                f"{used:,} bytes of {quota:,}{more} ({QUOTA_SETTING}, "
                "SandboxLimits.workspace_bytes)",
                hint=(
                    f"remove files from the workspace, or ask the operator to raise {QUOTA_SETTING}"
                ),
                details={"limit": QUOTA_SETTING, "used_bytes": used, "quota_bytes": quota},
            )

    # -- launching ----------------------------------------------------------------------------

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in self.params.env_allowlist if k in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(PATH=SANDBOX_PATH, HOME=self._workspace, TMPDIR="/tmp")
        env.update(dict(self.params.env))
        env.update(extra or {})
        return env

    def _read_only_dirs(self) -> list[tuple[int, str]]:
        """Open (creating if needed) each read-only sub-path as an O_PATH descriptor."""
        if self.params.mode != "read_write":
            return []
        root = open_dir_fd(self._host_workspace)
        opened: list[tuple[int, str]] = []
        try:
            for sub in self.params.read_only_subpaths:
                parts = [p for p in sub.split("/") if p]
                current = os.dup(root)
                try:
                    for part in parts:
                        with suppress(FileExistsError):
                            os.mkdir(part, 0o755, dir_fd=current)
                        nxt = safe_open_in(current, part, os.O_PATH | os.O_DIRECTORY)
                        os.close(current)
                        current = nxt
                except BaseException:
                    os.close(current)
                    raise
                opened.append((current, f"{self._workspace}/{'/'.join(parts)}"))
        except BaseException:
            for fd, _ in opened:
                os.close(fd)
            raise
        finally:
            os.close(root)
        return opened

    @asynccontextmanager
    async def _launch(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str] | None,
        extra_fds: Mapping[int, int] | None,
        extra_ro_binds: Sequence[ReadOnlyBind],
        stdin: str | int,
        stdout: str | int,
        stderr: str | int,
        timeout: float | None,  # noqa: ASYNC109
    ) -> AsyncIterator[LocalProcess]:
        """Start one process tree; with network, behind an egress proxy of its own that
        outlives it (docs/sandbox.md, "The network")."""
        if not argv:
            raise ValueError("argv must name a program")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        fd_map = dict(extra_fds or {})
        if sorted(fd_map) != list(range(3, 3 + len(fd_map))):
            raise ValueError(f"extra_fds numbers must be dense from 3, got {sorted(fd_map)}")
        if cwd is not None and not cwd.startswith("/"):
            cwd = f"{self._workspace}/{cwd}"  # relative to the workspace, like the file API
        await self.check_quota()
        limits = self.params.limits
        binds = (*self.params.extra_ro_binds, *extra_ro_binds)
        rw_binds = self.params.extra_rw_binds
        to_close: list[int] = []
        cgroup: Cgroup | None = None
        egress = AsyncExitStack()  # the tree's egress proxy, closed once the tree is gone
        try:
            if self._bwrap is not None:
                policy = network_policy(self.params.network)
                egress_socket: str | None = None
                if policy is not None:
                    label = f"the sandbox of {self._host_workspace!r}"
                    egress_socket = await egress.enter_async_context(
                        egress_proxy(policy, label=label)
                    )
                    argv = guest_argv(self._python, argv, policy.loopback_ports())
                ws_fd = os.open(self._host_workspace, _O_PATH_DIR)
                to_close.append(ws_fd)
                ro_dirs = self._read_only_dirs()
                to_close.extend(fd for fd, _ in ro_dirs)
                next_fd = 3 + len(fd_map)
                fd_map[next_fd] = ws_fd
                ro_fds: list[tuple[int, str]] = []
                for fd, dest in ro_dirs:
                    next_fd += 1
                    fd_map[next_fd] = fd
                    ro_fds.append((next_fd, dest))
                data_fds: list[tuple[int, str]] = []
                uid, gid = self._run_as or (os.geteuid(), os.getegid())
                for content, dest in zip(
                    identity_files(uid, gid), ("/etc/passwd", "/etc/group"), strict=True
                ):
                    data_fd = _memfd_with(content)
                    to_close.append(data_fd)
                    next_fd += 1
                    fd_map[next_fd] = data_fd
                    data_fds.append((next_fd, dest))
                seccomp_fd: int | None = None
                if self._seccomp is not None:
                    filter_fd = _memfd_with(self._seccomp)
                    to_close.append(filter_fd)
                    next_fd += 1
                    fd_map[next_fd] = filter_fd
                    seccomp_fd = next_fd
                host_argv = build_bwrap_argv(
                    bwrap=self._bwrap,
                    argv=argv,
                    workspace_fd=3 + len(extra_fds or {}),
                    workspace_path=self._workspace,
                    workspace_writable=self.params.mode == "read_write",
                    read_only_fds=ro_fds,
                    extra_ro_binds=binds,
                    tmp_size_bytes=limits.tmp_size_bytes,
                    env=self._env(env),
                    cwd=cwd or self._workspace,
                    seccomp_fd=seccomp_fd,
                    run_as=self._run_as,
                    setpriv=self._setpriv,
                    data_fds=data_fds,
                    extra_rw_binds=rw_binds,
                    egress_socket=egress_socket,
                )
                launch_env: dict[str, str] = dict(LAUNCHER_ENV)
                host_cwd = "/"
            else:
                shown: list[ReadOnlyBind | ReadWriteBind] = [*binds, *rw_binds]
                for bind in shown:
                    if bind.host_path != bind.sandbox_path:
                        raise SandboxError(
                            f"passthrough cannot show {bind.host_path!r} at "
                            f"{bind.sandbox_path!r}: there is no mount namespace"
                        )
                host_argv = list(argv)
                launch_env = self._env(env)
                host_cwd = cwd or self._host_workspace
                if shutil.which(argv[0], path=launch_env["PATH"]) is None:
                    raise SandboxError(
                        f"cannot start {argv[0]!r}: no such program",
                        hint=f"PATH inside is {launch_env['PATH']!r}",
                    )
            if self._cgroups.available:
                try:
                    cgroup = create_cgroup(
                        memory_bytes=limits.memory_bytes,
                        processes=limits.processes,
                        cpu_cores=limits.cpu_cores,
                    )
                except OSError as exc:
                    raise SandboxError(f"cannot create the sandbox's cgroup: {exc}") from exc
            rlimits = limits
            if not limits.limit_address_space and cgroup is not None:
                rlimits = replace(limits, memory_bytes=None)  # the memory cgroup bounds the tree
            spec = ProcessSpec(
                argv=host_argv,
                env=launch_env,
                cwd=host_cwd,
                fd_map=fd_map,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                limits=rlimits,
                cgroup=cgroup,
                budget_probe=(
                    self.usage_bytes
                    if limits.write_budget_bytes
                    or limits.workspace_bytes
                    or self.params.shared_quota
                    else None
                ),
                shared_quota=(
                    (self.shared_usage_bytes, self.params.shared_quota.limit_bytes)
                    if self.params.shared_quota is not None
                    else None
                ),
                budget_device=os.stat(self._host_workspace).st_dev,
                helpers=self._helpers,
            )
            wall = timeout if timeout is not None else limits.wall_timeout_seconds
            owned, cgroup = cgroup, None  # open_process removes it from here on
            async with open_process(spec, timeout=wall, cgroup_owned=owned) as proc:
                for fd in to_close:
                    os.close(fd)
                to_close.clear()
                yield proc
        finally:
            await egress.aclose()
            for fd in to_close:
                os.close(fd)
            if cgroup is not None:
                cgroup.remove()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        extra_fds: Mapping[int, int] | None = None,
        extra_ro_binds: Sequence[ReadOnlyBind] = (),
        stdin: bool = False,
        timeout: float | None = None,
    ) -> AbstractAsyncContextManager[LocalProcess]:
        """Start ``argv`` with stdout/stderr pipes (see :meth:`Sandbox.spawn`)."""
        return self._launch(
            argv,
            cwd=cwd,
            env=env,
            extra_fds=extra_fds,
            extra_ro_binds=extra_ro_binds,
            stdin="pipe" if stdin else "devnull",
            stdout="pipe",
            stderr="pipe",
            timeout=timeout,
        )

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
        max_output_bytes: int | None = None,
    ) -> CompletedRun:
        """Run ``argv`` to completion (see :meth:`Sandbox.run`)."""
        cap = DEFAULT_MAX_OUTPUT_BYTES if max_output_bytes is None else max_output_bytes
        if cap < 0:
            raise ValueError(f"max_output_bytes must be >= 0, got {max_output_bytes!r}")
        out: list[tuple[bytes, bool]] = []
        err: list[tuple[bytes, bool]] = []
        drained = (anyio.Event(), anyio.Event())
        async with (
            self._launch(
                argv,
                cwd=cwd,
                env=env,
                extra_fds=None,
                extra_ro_binds=(),
                stdin="pipe" if stdin is not None else "devnull",
                stdout="pipe",
                stderr="pipe",
                timeout=timeout,
            ) as proc,
            anyio.create_task_group() as tg,
        ):
            assert proc.stdout is not None
            assert proc.stderr is not None
            tg.start_soon(drain_capped, proc.stdout, cap, out, drained[0])
            tg.start_soon(drain_capped, proc.stderr, cap, err, drained[1])
            if stdin is not None and proc.stdin is not None:
                tg.start_soon(_feed, proc.stdin, stdin)
            await proc.wait()
            proc.kill_tree_now()  # leftovers would hold the pipes open
            with anyio.move_on_after(DRAIN_GRACE_SECONDS):
                for event in drained:
                    await event.wait()
            tg.cancel_scope.cancel()
        stdout, out_trunc = out[0] if out else (b"", False)
        stderr, err_trunc = err[0] if err else (b"", False)
        return CompletedRun(
            exit_code=None if proc.killed_reason else proc.returncode,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=out_trunc,
            stderr_truncated=err_trunc,
            timed_out=proc.killed_reason == "timeout",
            killed_reason=proc.killed_reason,
        )

    # -- background tasks -----------------------------------------------------------------

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> str:
        """Start ``argv`` in the background (see :meth:`Sandbox.start`)."""
        if self._tg is None or self._logs_dir is None:
            raise SandboxError("start() needs the sandbox context: use 'async with sandbox:'")
        cap = self.params.limits.background_tasks
        running = sum(1 for task in self._tasks.values() if not task.done.is_set())
        if cap is not None and running >= cap:
            raise TooManyTasksError(
                f"{running} background tasks are running, as many as this sandbox allows "
                f"({TASKS_SETTING}, SandboxLimits.background_tasks)",
                hint="wait for a task to end or kill one, then start this one",
                details={"limit": TASKS_SETTING, "running": running, "cap": cap},
            )
        task_id = uuid.uuid4().hex[:12]
        log_path = os.path.join(self._logs_dir, f"{task_id}.log")
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        task = BackgroundTask(task_id=task_id, argv=tuple(argv), log_path=log_path)
        try:
            await self._tg.start(self._run_task, task, log_fd, cwd, env, timeout)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(log_path)
            raise
        finally:
            os.close(log_fd)
        self._tasks[task_id] = task
        return task_id

    async def _run_task(
        self,
        task: BackgroundTask,
        log_fd: int,
        cwd: str | None,
        env: Mapping[str, str] | None,
        timeout: float | None,  # noqa: ASYNC109
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False
        try:
            async with self._launch(
                task.argv,
                cwd=cwd,
                env=env,
                extra_fds=None,
                extra_ro_binds=(),
                stdin="devnull",
                stdout=log_fd,
                stderr="stdout",
                timeout=timeout,
            ) as proc:
                task.process = proc
                task_status.started()
                started = True
                await proc.wait()
        except Exception as error:
            if not started:
                raise  # start() raises it to its caller
            # After the start, a failure (the teardown of the process tree or its cgroup) is
            # this task's, never the sandbox owner's: raised here it would end the task group,
            # and the group cancels the task that entered the sandbox, whatever it is doing.
            logger.warning(
                "background task %s (%s): its teardown failed: %s: %s",
                task.task_id,
                task.argv[0],
                type(error).__name__,
                error,
            )
        finally:
            task.done.set()

    def _task(self, task_id: str) -> BackgroundTask:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFoundError(f"no background task {task_id!r}", details={"task_id": task_id})
        return task

    async def status(self, task_id: str) -> TaskStatus:
        """Return the task's status (see :meth:`Sandbox.status`)."""
        return self._task(task_id).status()

    async def wait(
        self,
        task_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> TaskStatus:
        """Wait for the task to end, at most ``timeout`` seconds."""
        task = self._task(task_id)
        with anyio.move_on_after(timeout):
            await task.done.wait()
        return task.status()

    async def kill(self, task_id: str) -> TaskStatus:
        """Kill the task's whole process tree and return its final status."""
        task = self._task(task_id)
        if task.process is not None and not task.done.is_set():
            await task.process.kill("killed")
            with anyio.CancelScope(shield=True), anyio.move_on_after(DRAIN_GRACE_SECONDS):
                await task.done.wait()
        return task.status()

    async def read_background_output_range(
        self, task_id: str, offset: int, max_bytes: int
    ) -> tuple[str, int]:
        """Read the task's log from ``offset`` without splitting UTF-8."""
        task = self._task(task_id)
        return await anyio.to_thread.run_sync(
            read_log_range, task.log_path, offset, max_bytes, task.done.is_set()
        )

    # -- files -------------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        """Return the file's bytes (see :meth:`Sandbox.read_file`)."""
        return await anyio.to_thread.run_sync(self._files.read_file, path)

    async def write_file(self, path: str, data: bytes) -> str:
        """Write the file atomically (see :meth:`Sandbox.write_file`); refused with
        ``quota_exceeded`` when it would not fit the workspace quota."""
        await self.check_quota(len(data))
        return await anyio.to_thread.run_sync(self._files.write_file, path, data)

    async def list_dir(self, path: str) -> list[DirEntry]:
        """List a directory (see :meth:`Sandbox.list_dir`)."""
        return await anyio.to_thread.run_sync(self._files.list_dir, path)

    async def stat(self, path: str) -> FileStat:
        """Stat a path (see :meth:`Sandbox.stat`)."""
        return await anyio.to_thread.run_sync(self._files.stat, path)

    async def exists(self, path: str) -> bool:
        """True when the path exists inside the workspace."""
        return await anyio.to_thread.run_sync(self._files.exists, path)

    async def mkdir(self, path: str, *, parents: bool = True) -> str:
        """Create a directory (see :meth:`Sandbox.mkdir`)."""
        return await anyio.to_thread.run_sync(lambda: self._files.mkdir(path, parents=parents))

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a path (see :meth:`Sandbox.remove`)."""
        await anyio.to_thread.run_sync(lambda: self._files.remove(path, recursive=recursive))

    async def glob(self, pattern: str) -> list[str]:
        """Match a glob pattern under the workspace (see :meth:`Sandbox.glob`)."""
        return await anyio.to_thread.run_sync(self._files.glob, pattern)


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both resolved)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip("/") + "/")


def _memfd_with(data: bytes) -> int:
    """A close-on-exec memory file holding ``data``, positioned at its start."""
    fd = os.memfd_create("sagents-data", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def _feed(stream: anyio.abc.ByteSendStream, data: bytes) -> None:
    try:
        await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        return  # the program stopped reading: not our failure
    await stream.aclose()
