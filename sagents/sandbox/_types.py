"""Plain values of the sandbox layer: parameters, limits, run results, task status, file stats.

Everything here is a frozen keyword-only dataclass; nothing touches the OS. Paths in these
values are *sandbox paths* (strings, as the sandbox sees them), never host paths, so that a
remote provider can fill them in too (docs/sandbox.md, "Paths are sandbox paths").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sagents.sandbox._network import NetworkPolicy

__all__ = [
    "DEFAULT_CPU_CORES",
    "DEFAULT_ENV_ALLOWLIST",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_SANDBOX_UID",
    "CompletedRun",
    "DirEntry",
    "FileStat",
    "IsolationLevel",
    "KillReason",
    "ReadOnlyBind",
    "ReadWriteBind",
    "SandboxInfo",
    "SandboxKind",
    "SandboxLimits",
    "SandboxMode",
    "SandboxParams",
    "SharedQuota",
    "TaskState",
    "TaskStatus",
]

SandboxKind = Literal["local", "passthrough", "memory"]
"""The providers :func:`sagents.sandbox.create_sandbox` builds (``remote`` is not built yet)."""

SandboxMode = Literal["read_write", "read_only"]
"""``read_only`` makes the workspace read-only inside the sandbox (and in the file API)."""

IsolationLevel = Literal["bubblewrap", "none", "in_memory"]
"""What stands between a sandboxed program and the host."""

KillReason = Literal[
    "timeout", "output_limit", "write_budget", "workspace_quota", "killed", "cancelled"
]
"""Why a run or task was ended by the sandbox rather than exiting by itself."""

TaskState = Literal["running", "exited", "killed"]
"""Lifecycle of a background task: ``running`` → ``exited`` (by itself) or ``killed``."""

DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024  # per stream, for run(): 1 MiB
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
"""Host variables copied into the sandbox when set; everything else is dropped."""
DEFAULT_SANDBOX_UID = 2_000_000_000
"""The host uid (and gid) that ``local`` programs run as when sagents runs as root: above the
ranges distributions, systemd and container tools hand out, so that no other process shares it."""
DEFAULT_CPU_CORES = 1.0
"""Default CPU share of one process tree, in cores (cgroup ``cpu`` quota)."""


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    """Resource limits of every process the sandbox starts. ``None`` means "no limit".

    Attributes:
        memory_bytes: Address space per process (RLIMIT_AS) and, where cgroups are writable,
            the memory of the whole sandbox (memory cgroup). Default 2 GiB.
        cpu_seconds: CPU time per process (RLIMIT_CPU). Default 600 s.
        file_size_bytes: Largest file a process may write (RLIMIT_FSIZE). Default 256 MiB.
        open_files: Open descriptors per process (RLIMIT_NOFILE). Default 1024.
        processes: Processes of the whole sandbox (pids cgroup; RLIMIT_NPROC as well, which
            does not bind root). Default 256.
        tmp_size_bytes: Size of the private ``/tmp`` tmpfs (RAM). Default 256 MiB.
        write_budget_bytes: How much the workspace may grow during one process's life; a
            watchdog ends the process past it. Default 1 GiB.
        wall_timeout_seconds: Default wall-clock timeout of ``run``/``start``/``spawn``.
            Default 600 s.
        cpu_cores: CPU time of the whole tree per wall-clock second, in cores (cgroup ``cpu``
            quota where that controller is writable; elsewhere the tree runs under
            ``SCHED_IDLE`` instead: it gets CPU only when nothing else wants it). Default 1 core.
        workspace_bytes: The workspace's quota: the most that the workspace and the host-side
            logs of background tasks may hold together, in bytes, whatever process or file
            call wrote it and however many runs it took (the same measure as the write budget).
            A program does not start once the quota is used up, and a running tree is ended
            past it (``workspace_quota``). None (the default): no quota. The gateway sets it
            from ``quotas.workspaceBytes``.
        background_tasks: How many background tasks (``start``) may run at once; one more is
            refused with ``too_many_tasks``. None (the default): no cap. The gateway sets it
            from ``quotas.backgroundTasksPerSession``.
        limit_address_space: True sets ``memory_bytes`` as each process's RLIMIT_AS too; False
            leaves the address space unbounded wherever the memory cgroup bounds the tree, for
            runtimes that reserve far more virtual memory than they use (Node's V8 cannot
            start under an RLIMIT_AS of 512 MiB). Without a writable memory cgroup RLIMIT_AS is
            set either way.
    """

    memory_bytes: int | None = 2 * 1024**3
    cpu_seconds: int | None = 600
    file_size_bytes: int | None = 256 * 1024**2
    open_files: int | None = 1024
    processes: int | None = 256
    tmp_size_bytes: int | None = 256 * 1024**2
    write_budget_bytes: int | None = 1024**3
    wall_timeout_seconds: float | None = 600.0
    cpu_cores: float | None = DEFAULT_CPU_CORES
    workspace_bytes: int | None = None
    background_tasks: int | None = None
    limit_address_space: bool = True

    def __post_init__(self) -> None:
        for name in (
            "memory_bytes",
            "cpu_seconds",
            "file_size_bytes",
            "open_files",
            "processes",
            "tmp_size_bytes",
            "write_budget_bytes",
            "wall_timeout_seconds",
            "cpu_cores",
            "workspace_bytes",
            "background_tasks",
        ):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"sandbox limit {name!r} must be positive or None, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ReadOnlyBind:
    """A host file or directory made visible read-only inside the sandbox.

    Attributes:
        host_path: Absolute path on the host.
        sandbox_path: Absolute path inside the sandbox (for ``passthrough`` it must equal
            ``host_path``, since there is no mount namespace).
    """

    host_path: str
    sandbox_path: str

    def __post_init__(self) -> None:
        if not self.host_path.startswith("/") or not self.sandbox_path.startswith("/"):
            raise ValueError(
                f"read-only bind paths must be absolute: {self.host_path!r} -> "
                f"{self.sandbox_path!r}"
            )


@dataclass(frozen=True, kw_only=True)
class ReadWriteBind:
    """A host directory (or file) made visible read-write inside the sandbox.

    Attributes:
        host_path: Absolute path on the host.
        sandbox_path: Absolute path inside the sandbox (for ``passthrough`` it must equal
            ``host_path``).
    """

    host_path: str
    sandbox_path: str

    def __post_init__(self) -> None:
        if not self.host_path.startswith("/") or not self.sandbox_path.startswith("/"):
            raise ValueError(
                f"read-write bind paths must be absolute: {self.host_path!r} -> "
                f"{self.sandbox_path!r}"
            )


@dataclass(frozen=True, kw_only=True)
class SharedQuota:
    """A quota a sandbox's workspace shares with other host directories: what they hold
    together (the gateway's per-principal quota, ``quotas.principalBytes``: every workspace of
    one token's sessions).

    Checked as ``SandboxLimits.workspace_bytes`` is: nothing starts and ``write_file`` is
    refused (``QuotaExceededError`` naming :attr:`setting`) once the sandbox's workspace, its
    background logs and the directories :attr:`elsewhere` names hold :attr:`limit_bytes`, and
    the watchdog ends a running tree past it (``killed_reason="workspace_quota"``).

    Attributes:
        limit_bytes: The most they hold together, in bytes.
        setting: The setting errors name (``"quotas.principalBytes"``).
        elsewhere: Returns the other host directories charged to the quota (called at each
            check, from a worker thread, so that a sandbox opened later counts; a directory that
            does not exist counts nothing).
        charged_bytes: Returns the bytes charged to the quota outside any directory (the
            gateway: the background calls' results its task store keeps for every session of
            the principal), called as :attr:`elsewhere` is; counted instead of
            :attr:`SandboxParams.charged_bytes`. None: nothing.
    """

    limit_bytes: int
    setting: str
    elsewhere: Callable[[], Sequence[str]]
    charged_bytes: Callable[[], int] | None = None

    def __post_init__(self) -> None:
        if self.limit_bytes <= 0:
            raise ValueError(f"limit_bytes must be positive, got {self.limit_bytes!r}")


@dataclass(frozen=True, kw_only=True)
class SandboxParams:
    """How to build a sandbox.

    Attributes:
        workspace: The host directory that becomes the workspace (created if missing; ignored by
            the ``memory`` provider).
        mode: ``read_write`` or ``read_only`` workspace.
        limits: Resource limits, see :class:`SandboxLimits`.
        env_allowlist: Names of host environment variables copied into the sandbox when set.
        env: Extra variables set in every sandboxed process (after the allowlist).
        extra_ro_binds: Host paths visible read-only in every sandboxed process.
        extra_rw_binds: Host paths visible read-write in every sandboxed process (a directory
            the sandbox's uid cannot write gets one ACL entry, as the workspace does); the
            write budget measures only the workspace.
        network: False (the default): no network at all. True or a :class:`NetworkPolicy`:
            the programs' only way out is the host's egress proxy (``HTTP_PROXY`` /
            ``HTTPS_PROXY``: ``CONNECT`` and plain ``http://``), which lets through what the
            policy allows; True is any public host, never loopback, link-local, private or
            cloud metadata addresses (docs/sandbox.md, "The network"). Either way the programs
            have a network namespace of their own with only its loopback.
        read_only_subpaths: Workspace-relative paths that stay read-only inside even in
            ``read_write`` mode (``.agent`` by default: run_script's records live there).
        workspace_path: Where the workspace appears inside the sandbox (``local``/``memory``);
            ``passthrough`` always uses the host path.
        logs_dir: The host directory where background tasks' logs go (created mode 0700 if
            missing; each sandbox writes only its own files there and removes them when it
            closes). None: a new temporary directory. The logs count against
            ``limits.workspace_bytes`` wherever they are.
        sandbox_uid: When sagents runs as root, the unprivileged host uid (and gid) that
            ``local`` programs run as, so that file modes protect the host's files; the
            workspace directory is given to it. None: :data:`DEFAULT_SANDBOX_UID`; ``0`` keeps
            root (file modes then protect nothing: ``describe().warnings`` says so). Ignored
            when sagents is not root (programs then run as its own uid) and by ``passthrough``.
        shared_quota: A quota shared with other directories (:class:`SharedQuota`), held by
            ``local`` beside ``limits.workspace_bytes``; None: none.
        charged_bytes: Returns the bytes charged to the workspace outside its directories
            (the gateway: the background calls' results its task store keeps for the session),
            counted with the workspace and its logs against ``limits.workspace_bytes`` so that
            they share one quota; called at each check, from a worker thread. None: nothing.
    """

    workspace: str
    mode: SandboxMode = "read_write"
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    env_allowlist: tuple[str, ...] = DEFAULT_ENV_ALLOWLIST
    env: tuple[tuple[str, str], ...] = ()
    extra_ro_binds: tuple[ReadOnlyBind, ...] = ()
    extra_rw_binds: tuple[ReadWriteBind, ...] = ()
    network: bool | NetworkPolicy = False
    read_only_subpaths: tuple[str, ...] = (".agent",)
    workspace_path: str = "/workspace"
    sandbox_uid: int | None = None
    logs_dir: str | None = None
    shared_quota: SharedQuota | None = None
    charged_bytes: Callable[[], int] | None = None

    def __post_init__(self) -> None:
        if self.sandbox_uid is not None and not 0 <= self.sandbox_uid < 2**31:
            raise ValueError(f"sandbox_uid must be a uid (0 to 2**31-1), got {self.sandbox_uid!r}")
        if not self.workspace_path.startswith("/") or self.workspace_path.rstrip("/") == "":
            raise ValueError(
                f"workspace_path must be an absolute path, got {self.workspace_path!r}"
            )
        for sub in self.read_only_subpaths:
            if sub.startswith("/") or ".." in sub.split("/") or not sub.strip("/"):
                raise ValueError(f"read_only_subpaths must be workspace-relative, got {sub!r}")


@dataclass(frozen=True, kw_only=True)
class CompletedRun:
    """The result of :meth:`Sandbox.run`.

    Attributes:
        exit_code: The process's exit status; negative ``-N`` when killed by signal N; None
            when the sandbox ended it before it exited.
        stdout: Captured standard output, at most ``max_output_bytes`` bytes.
        stderr: Captured standard error, at most ``max_output_bytes`` bytes.
        stdout_truncated: True when stdout was longer than the cap (the rest was discarded).
        stderr_truncated: Same for stderr.
        timed_out: True when the wall timeout ended the run.
        killed_reason: Why the sandbox ended the run, or None when it exited by itself.
    """

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    killed_reason: KillReason | None = None

    @property
    def ok(self) -> bool:
        """True when the process exited by itself with status 0."""
        return self.exit_code == 0 and self.killed_reason is None


@dataclass(frozen=True, kw_only=True)
class TaskStatus:
    """The state of a background task (:meth:`Sandbox.start`).

    Attributes:
        task_id: The id ``start`` returned.
        argv: The command.
        state: ``running``, ``exited`` or ``killed``.
        exit_code: Exit status once it ended (``-N`` for signal N), else None.
        killed_reason: Why the sandbox ended it, if it did.
        output_bytes: Bytes written to the task's output log so far.
        log_path: Where the log lives, as the provider names it (a host path for ``local``,
            an opaque name otherwise); informative only, read it with
            :meth:`Sandbox.read_background_output_range`.
    """

    task_id: str
    argv: tuple[str, ...]
    state: TaskState
    exit_code: int | None = None
    killed_reason: KillReason | None = None
    output_bytes: int = 0
    log_path: str = ""


@dataclass(frozen=True, kw_only=True)
class FileStat:
    """What :meth:`Sandbox.stat` knows about a path.

    Attributes:
        path: The normalised sandbox path.
        kind: ``file``, ``dir`` or ``other``.
        size: Size in bytes (0 for directories).
        mtime: Modification time, seconds since the epoch.
    """

    path: str
    kind: Literal["file", "dir", "other"]
    size: int
    mtime: float


@dataclass(frozen=True, kw_only=True)
class DirEntry:
    """One entry of :meth:`Sandbox.list_dir`.

    Attributes:
        name: The entry's name (no directory part).
        kind: ``file``, ``dir`` or ``other`` (symlinks are ``other``; they are not followed).
        size: Size in bytes for files, else 0.
    """

    name: str
    kind: Literal["file", "dir", "other"]
    size: int


@dataclass(frozen=True, kw_only=True)
class SandboxInfo:
    """What a sandbox says about itself (:meth:`Sandbox.describe`).

    Attributes:
        kind: The provider.
        isolation: ``bubblewrap``, ``none`` or ``in_memory``.
        workspace: The workspace as the sandbox sees it.
        mode: ``read_write`` or ``read_only``.
        cgroups: True when each process tree runs in its own memory+pids cgroup.
        runs_programs: False for providers that run only a built-in command set (``memory``).
        supports_spawn: True when :meth:`Sandbox.spawn` (extra fds, pipes) is available.
        python: The Python interpreter usable inside, or None.
        limits: The limits in force.
        warnings: Plain-English weaknesses of this configuration (no cgroups, no isolation).
        uid: The host uid programs run as, when the provider knows it (None otherwise).
    """

    kind: SandboxKind
    isolation: IsolationLevel
    workspace: str
    mode: SandboxMode
    cgroups: bool
    runs_programs: bool
    supports_spawn: bool
    python: str | None
    limits: SandboxLimits
    warnings: tuple[str, ...] = ()
    uid: int | None = None
