"""stdio servers in their own bubblewrap sandbox (docs/mcp.md, "Sandboxed servers").

A :class:`~sagents.mcp._settings.ServerSandbox` becomes the
:class:`~sagents.sandbox.SandboxParams` of a ``local`` sandbox whose workspace is the server's
home: the same provider, hardening and limits as run_script's (docs/sandbox.md), with the
operator's ``readable``/``writable`` host paths bound at their own paths. The server is started
with :meth:`~sagents.sandbox.LocalSandbox.spawn` and framed as JSON-RPC lines by the same code
as a host stdio server (:func:`sagents.mcp._stdio.frame_stdio`); its stderr is copied to the
server's log with the same cap (:class:`~sagents.mcp._stdio.CappedLog`). Closing it closes its
stdin, gives it :data:`~sagents.mcp._stdio.STDIN_CLOSE_GRACE` seconds to exit, then ends the
whole tree (bubblewrap's PID namespace and cgroup). A server with network reaches the outside
only through the egress proxy that :class:`~sagents.sandbox.LocalSandbox` runs in this process
for its tree, with the server's allowlist (docs/sandbox.md, "The network").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

from sagents.core._secrets import Redactor
from sagents.errors import SandboxError
from sagents.mcp._settings import ServerSandbox
from sagents.mcp._stdio import (
    STDERR_DRAIN_SECONDS,
    STDIN_CLOSE_GRACE,
    CappedLog,
    StdioProcess,
    copy_stderr,
    forget_group,
    frame_stdio,
    watch_group,
)
from sagents.mcp._streams import WriteStream
from sagents.sandbox import (
    LocalSandbox,
    ReadOnlyBind,
    ReadWriteBind,
    SandboxLimits,
    SandboxParams,
)
from sagents.sandbox._bwrap import python_runtime
from sagents.sandbox._local import SANDBOX_PATH
from sagents.sandbox._process import LocalProcess

__all__ = [
    "HOME_PATH",
    "SYSTEM_ROOTS",
    "check_command",
    "check_config_file",
    "default_home_root",
    "open_sandboxed_stdio_transport",
    "sandbox_params",
]

HOME_PATH = "/workspace"  # where the server's home appears inside (its HOME)
SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host paths every sandbox shows read-only (the merged-usr links lead into ``/usr``)."""
_MIB = 1024 * 1024


def default_home_root() -> Path:
    """The directory holding each sandboxed server's home (``<root>/<server>``).

    ``$SAGENTS_DATA_DIR/mcp-home`` when ``SAGENTS_DATA_DIR`` is set, else
    ``$XDG_STATE_HOME/sagents/mcp-home``, else ``~/.local/state/sagents/mcp-home``: beside the
    servers' logs (:func:`sagents.mcp.default_log_dir`).
    """
    data = os.environ.get("SAGENTS_DATA_DIR")
    if data:
        return Path(data).expanduser().absolute() / "mcp-home"
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sagents" / "mcp-home"


def _shown_at(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(host source, path inside)`` pairs: each path at itself and, when it goes through a
    symlink, at its target too (a venv's scripts name their interpreter by its real path)."""
    pairs: list[tuple[str, str]] = []
    for path in paths:
        norm = os.path.normpath(path)
        real = os.path.realpath(norm)
        for inside in dict.fromkeys((norm, real)):
            pairs.append((real, inside))
    return pairs


def _protected_dirs(home_root: Path) -> dict[str, str]:
    """The gateway's own directories no server's sandbox may show, by what they are."""
    from sagents.audit import default_data_dir  # the audit store's package: only when needed

    return {
        "data dir": os.path.realpath(default_data_dir()),
        "state dir": os.path.realpath(home_root.parent),
    }


def _entries(sandbox: ServerSandbox) -> list[tuple[str, str]]:
    """``(where, path)`` of every host path the block shows: ``readable.0``, ``home``, ..."""
    entries = [
        (f"{kind}.{index}", path)
        for kind in ("readable", "writable")
        for index, path in enumerate(getattr(sandbox, kind))
    ]
    if sandbox.home is not None:
        entries.append(("home", sandbox.home))
    return entries


def _check_not_protected(
    server: str, sandbox: ServerSandbox, *, own_home: Path, home_root: Path, log_dir: Path | None
) -> None:
    """Refuse a ``readable``, ``writable`` or ``home`` path that is, contains or lies inside
    the gateway's data dir (audit store, tokens, background tasks) or state dir (the servers'
    logs and the other servers' homes), the server's own default home excepted; and one that
    is or contains the directory of the server's log, or is a file in it (another server's
    log, where ``log_dir`` is set elsewhere); a directory below it holds no log and is fine.

    Raises:
        SandboxError: such a path, named with the directory it would show.
    """
    protected = _protected_dirs(home_root)
    logs = os.path.realpath(log_dir) if log_dir is not None else None
    own = os.path.realpath(own_home)
    for where, path in _entries(sandbox):
        kind = where.split(".", 1)[0]
        real = os.path.realpath(path)
        if kind == "home" and real == own:
            continue
        shown = [d for d in protected.values() if _inside(real, d) or _inside(d, real)]
        if logs is not None and (_inside(logs, real) or (_inside(real, logs) and _maybe_log(real))):
            shown.append(logs)
        if shown:
            raise SandboxError(
                f"sandbox {kind} path {path!r} of MCP server {server!r} would show the "
                f"gateway's own directory {shown[0]!r} (its audit store, the servers' logs or "
                "other servers' homes) to the server",
                hint=f"give sandbox.{kind} a directory outside {shown[0]!r} that does not "
                "contain it",
                details={"where": where},
            )


def _maybe_log(path: str) -> bool:
    """Whether a path in a log directory is, or could become, a server's log."""
    return path.endswith(".log") or (os.path.exists(path) and not os.path.isdir(path))


def check_config_file(server: str, sandbox: ServerSandbox) -> None:
    """Refuse a block that would let the server rewrite the gateway's configuration file, or
    read it when it holds secrets (:attr:`ServerSandbox.config_file`).

    A ``writable`` path or ``home`` that is or contains the file would let the server choose
    what the host runs at its next start; a ``readable`` one, when
    :attr:`ServerSandbox.config_has_secrets`, would show it the other servers' keys.

    Raises:
        SandboxError: such a path; ``details["where"]`` names it (``writable.0``, ``home``).
    """
    if sandbox.config_file is None:
        return
    config = os.path.realpath(sandbox.config_file)
    for where, path in _entries(sandbox):
        if not _inside(config, os.path.realpath(path)):
            continue
        if where.startswith("readable"):
            if not sandbox.config_has_secrets:
                continue
            raise SandboxError(
                f"sandbox path {path!r} of MCP server {server!r} would show the config file "
                f"{config!r}, which holds secrets (values written into it, not ${{NAME}} "
                "references), to the server",
                hint="write the secrets as ${NAME} references to environment variables, or "
                "list a directory that does not contain the config file",
                details={"where": where},
            )
        raise SandboxError(
            f"sandbox path {path!r} of MCP server {server!r} would let the server rewrite the "
            f"config file {config!r} (and so choose what the host runs)",
            hint="give the server a directory that does not contain the config file",
            details={"where": where},
        )


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def sandbox_params(
    server: str,
    params: StdioServerParameters,
    sandbox: ServerSandbox,
    *,
    home_root: Path | None = None,
    log_dir: Path | None = None,
) -> SandboxParams:
    """The sandbox of one stdio server.

    Args:
        server: The server's registered name (its home is ``<home_root>/<server>``).
        params: The server's command, arguments, ``env`` values and ``cwd``.
        sandbox: The server's ``sandbox`` settings.
        home_root: Where homes live; None: :func:`default_home_root`.
        log_dir: The directory of the server's log, which the sandbox must not show.

    Raises:
        SandboxError: a ``readable``/``writable`` path does not exist, or would show the
            gateway's own directories or its config file (:func:`check_config_file`).
    """
    for path in (*sandbox.readable, *sandbox.writable):
        if not os.path.exists(path):
            raise SandboxError(
                f"sandbox path {path!r} of MCP server {server!r} does not exist",
                hint="create it, or remove it from the server's sandbox block",
            )
    root = home_root or default_home_root()
    home = sandbox.home or str(root / server)
    _check_not_protected(server, sandbox, own_home=root / server, home_root=root, log_dir=log_dir)
    check_config_file(server, sandbox)
    limits = SandboxLimits(
        memory_bytes=sandbox.memory_mb * _MIB if sandbox.memory_mb is not None else None,
        cpu_seconds=sandbox.cpu_seconds,
        processes=sandbox.max_processes,
        cpu_cores=sandbox.cpu_cores,
        wall_timeout_seconds=None,  # a server lives as long as its connection
        write_budget_bytes=None,  # package caches in the home grow over the server's life
        workspace_bytes=sandbox.home_bytes,  # quotas.workspaceBytes: the home is charged
        limit_address_space=False,  # V8 and Go reserve far more than they use
    )
    return SandboxParams(
        workspace=home,
        workspace_path=HOME_PATH,
        limits=limits,
        env_allowlist=(*SandboxParams(workspace=home).env_allowlist, *sandbox.env),
        env=tuple((params.env or {}).items()),
        extra_ro_binds=tuple(
            ReadOnlyBind(host_path=src, sandbox_path=dest)
            for src, dest in _shown_at(sandbox.readable)
        ),
        extra_rw_binds=tuple(
            ReadWriteBind(host_path=src, sandbox_path=dest)
            for src, dest in _shown_at(sandbox.writable)
        ),
        network=sandbox.network,
        read_only_subpaths=(),
        sandbox_uid=sandbox.uid,
    )


def _visible_roots(box: SandboxParams) -> list[str]:
    roots = [os.path.realpath(p) for p in SYSTEM_ROOTS if os.path.exists(p)]
    roots.append(python_runtime()[0])
    roots += [b.host_path for b in box.extra_ro_binds]
    roots += [b.host_path for b in box.extra_rw_binds]
    return roots


def _is_visible(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


def _interpreter(path: str) -> str | None:
    """The absolute interpreter a ``#!`` script names, or None."""
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    first = head[2:].split(b"\n", 1)[0].strip().split()
    word = first[0].decode(errors="replace") if first else ""
    return word if word.startswith("/") else None


def check_command(server: str, params: StdioServerParameters, box: SandboxParams) -> str:
    """Where the server's command is on the host; it must be visible inside the sandbox.

    Returns:
        The command's host path (also its path inside).

    Raises:
        SandboxError: the command (or its ``#!`` interpreter) is not found on the sandbox's
            ``PATH``, or lies outside what the sandbox shows; the hint names the directory to
            add to ``readable``; the ``cwd`` is not visible either.
    """
    path_inside = dict(box.env).get("PATH", SANDBOX_PATH)
    found = shutil.which(params.command, path=path_inside)
    if found is None:
        raise SandboxError(
            f"MCP server {server!r}: command {params.command!r} is not found on the sandbox's "
            f"PATH {path_inside!r}",
            hint="give the command's absolute path and add its directory to sandbox.readable",
        )
    roots = _visible_roots(box)
    for program in (found, _interpreter(found)):
        if program is not None and not _is_visible(program, roots):
            directory = os.path.dirname(os.path.realpath(program))
            raise SandboxError(
                f"MCP server {server!r}: {program!r} is not visible inside its sandbox",
                hint=f"add {directory!r} (or a directory above it) to sandbox.readable",
            )
    if params.cwd is not None and not _is_visible(str(params.cwd), roots):
        raise SandboxError(
            f"MCP server {server!r}: its cwd {str(params.cwd)!r} is not visible inside its sandbox",
            hint="add it to sandbox.readable or sandbox.writable, or leave cwd out (the home)",
        )
    return found


class _SandboxTree:
    """A sandboxed server's tree as a :class:`~sagents.mcp._stdio.RunningProcess`."""

    def __init__(self, process: LocalProcess) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    def kill_tree(self) -> None:
        self._process.kill_tree_now()


@asynccontextmanager
async def open_sandboxed_stdio_transport(
    server: str,
    params: StdioServerParameters,
    sandbox: ServerSandbox,
    *,
    log_path: Path,
    on_start: Callable[[StdioProcess], None] | None = None,
    home_root: Path | None = None,
    redactor: Redactor | None = None,
) -> AsyncIterator[
    tuple[
        anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
        WriteStream[SessionMessage],
        StdioProcess,
    ]
]:
    """Start a stdio server in its sandbox; yield ``(read_stream, write_stream, process)``.

    Args:
        server: The server's registered name.
        params: Command, arguments, ``env`` values (the only variables set besides the
            sandbox's ``PATH``, ``HOME``, ``TMPDIR``, the locale ones and ``sandbox.env``) and
            ``cwd`` (a visible host path; the home by default).
        sandbox: The server's sandbox settings.
        log_path: File the server's stderr is appended to.
        on_start: Called with the process as soon as it runs.
        home_root: Where homes live; None: :func:`default_home_root`.
        redactor: Secrets redacted from the stderr log (docs/gateway.md, "Secrets").

    Raises:
        SandboxError: a path or the command is not usable (see :func:`check_command`), or the
            sandbox cannot start.
        SandboxUnavailableError: bubblewrap is missing or unusable here.
    """
    box_params = sandbox_params(
        server, params, sandbox, home_root=home_root, log_dir=log_path.parent
    )
    check_command(server, params, box_params)
    argv = [params.command, *params.args]
    box = await anyio.to_thread.run_sync(LocalSandbox, box_params)  # probes bubblewrap
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("a", encoding="utf-8", errors="replace")
    try:
        log_offset = log.tell()
        cwd = str(params.cwd) if params.cwd is not None else None
        copying = anyio.CancelScope(shield=True)  # see copy_stderr
        async with (
            box,
            box.spawn(argv, cwd=cwd, stdin=True) as process,
            anyio.create_task_group() as tg,
        ):
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            watch_group(process.pid)
            try:
                handle = StdioProcess(
                    _SandboxTree(process), log_path=log_path, log_offset=log_offset, sandboxed=True
                )
                if on_start is not None:
                    on_start(handle)
                drained = anyio.Event()
                capped = CappedLog(log, redactor)
                tg.start_soon(copy_stderr, process.stderr, capped, drained, copying)
                stdin = process.stdin

                async def stop() -> None:
                    await stdin.aclose()
                    with anyio.move_on_after(STDIN_CLOSE_GRACE):
                        await process.wait()
                    await process.kill()
                    with anyio.move_on_after(STDERR_DRAIN_SECONDS):
                        await drained.wait()  # the last lines belong in the log

                async with frame_stdio(
                    stdin,
                    process.stdout,
                    encoding=params.encoding,
                    log=capped,
                    handle=handle,
                    stop=stop,
                ) as (read_stream, write_stream):
                    yield read_stream, write_stream, handle
            finally:
                forget_group(process.pid)
                copying.cancel()
                tg.cancel_scope.cancel()
    finally:
        log.close()
