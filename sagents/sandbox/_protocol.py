"""The ``Sandbox`` protocol: what every provider (local, passthrough, memory, a future remote)
offers to the layers above (docs/sandbox.md; docs/architecture.md, "Layers").

Paths are *sandbox paths*: strings as the sandbox sees them, absolute under
``describe().workspace`` or relative to it. Nothing above this layer may assume they exist on
the host: use the file API. Errors: :class:`~sagents.errors.PathNotAllowedError` for a path
outside the roots (``..``, a symlink out, a read-only place), the builtin ``FileNotFoundError``,
``IsADirectoryError``, ``NotADirectoryError``, ``FileExistsError`` for what their names say,
:class:`~sagents.errors.TaskNotFoundError` for an unknown task id, and
:class:`~sagents.errors.SandboxError` for a provider failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

import anyio.abc

from sagents.sandbox._types import (
    CompletedRun,
    DirEntry,
    FileStat,
    KillReason,
    ReadOnlyBind,
    SandboxInfo,
    TaskStatus,
)

__all__ = ["Sandbox", "SandboxProcess"]


@runtime_checkable
class SandboxProcess(Protocol):
    """A process started by :meth:`Sandbox.spawn`, for callers that drive it themselves
    (run_script: fds 3/4, output drained as it comes).

    Attributes:
        stdin: Write end of the child's stdin (when ``stdin=True`` was asked), else None.
        stdout: The child's stdout; drain it as it comes (``EndOfStream`` at the end).
        stderr: The child's stderr.
        returncode: Exit status once it ended (``-N`` for signal N), else None.
        killed_reason: Why the sandbox ended it (timeout, write budget, kill), else None.
    """

    stdin: anyio.abc.ByteSendStream | None
    stdout: anyio.abc.ByteReceiveStream | None
    stderr: anyio.abc.ByteReceiveStream | None
    returncode: int | None
    killed_reason: KillReason | None

    async def wait(self) -> int:
        """Wait for the exit; return the status (``-N`` for signal N)."""
        ...

    async def kill(self, reason: KillReason = "killed") -> None:
        """End the whole process tree (grandchildren in new sessions too) and reap it."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs programs and touches files in one isolated workspace.

    Providers are async context managers: background tasks (:meth:`start`) need the context to
    be open, and closing it kills every task still running and frees the provider's resources.
    """

    async def __aenter__(self) -> Sandbox: ...

    async def __aexit__(self, *exc_info: object) -> None: ...

    async def aclose(self) -> None:
        """Kill every background task and free resources (idempotent)."""
        ...

    def describe(self) -> SandboxInfo:
        """Say what isolation is in force, whether cgroups are used, and what is weaker."""
        ...

    # -- programs ---------------------------------------------------------------------------

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
        """Run ``argv`` to completion.

        Args:
            argv: Program and arguments, as seen inside (non-empty).
            cwd: Working directory (sandbox path); the workspace by default.
            env: Variables added to the sandbox's allowlisted environment.
            stdin: Bytes fed to the program's stdin (then closed); None gives ``/dev/null``.
            timeout: Wall-clock seconds; the limits' ``wall_timeout_seconds`` by default. On
                timeout the whole tree is killed and ``timed_out`` is set.
            max_output_bytes: Cap per stream in bytes (the rest is drained and discarded,
                ``*_truncated`` set); ``DEFAULT_MAX_OUTPUT_BYTES`` by default.

        Raises:
            ValueError: for an empty ``argv`` or a non-positive cap or timeout.
            SandboxError: when the program cannot be started.
        """
        ...

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> str:
        """Start ``argv`` in the background; stdout and stderr go, interleaved in order, to the
        task's log. Returns the task id. Requires the context to be open.
        """
        ...

    async def status(self, task_id: str) -> TaskStatus:
        """Return the task's state, exit code and log size. Raises TaskNotFoundError."""
        ...

    async def wait(
        self,
        task_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> TaskStatus:
        """Wait up to ``timeout`` seconds (None: no bound) for the task to end; return its
        status (still ``running`` when the wait timed out). Raises TaskNotFoundError."""
        ...

    async def kill(self, task_id: str) -> TaskStatus:
        """Kill the task's whole process tree and reap it; return the final status."""
        ...

    async def read_background_output_range(
        self, task_id: str, offset: int, max_bytes: int
    ) -> tuple[str, int]:
        """Read the task's log from byte ``offset``: at most about ``max_bytes`` bytes, never
        ending inside a UTF-8 character (an incomplete trailing sequence is held back until it
        completes or the task ends; invalid bytes become U+FFFD). Returns
        ``(text, new_offset)``. Raises TaskNotFoundError, ValueError for a negative offset or
        ``max_bytes < 1``.
        """
        ...

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
    ) -> AbstractAsyncContextManager[SandboxProcess]:
        """Start ``argv`` with pipes the caller drains, for run_script.

        Args:
            argv: Program and arguments, as seen inside.
            cwd: Working directory (sandbox path); the workspace by default.
            env: Variables added to the allowlisted environment.
            extra_fds: ``{number in the child: host descriptor}``, numbers dense from 3 (e.g.
                ``{3: requests_write_end, 4: replies_read_end}``). The child sees exactly 0, 1,
                2 and these.
            extra_ro_binds: Host files or directories visible read-only inside (the guest
                helper module).
            stdin: True gives the caller a stdin pipe; otherwise stdin is ``/dev/null``.
            timeout: Wall-clock seconds before the tree is killed (``killed_reason="timeout"``).

        Returns:
            An async context manager yielding the :class:`SandboxProcess`; leaving it kills and
            reaps whatever is left of the tree.

        Raises:
            SandboxError: when the provider cannot spawn (``describe().supports_spawn`` False).
        """
        ...

    # -- files ----------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        """Return the whole content of the file at ``path``."""
        ...

    async def write_file(self, path: str, data: bytes) -> str:
        """Write ``data`` atomically (replacing any old file); return the normalised path.
        The parent directory must exist."""
        ...

    async def list_dir(self, path: str) -> list[DirEntry]:
        """List a directory's entries, sorted by name."""
        ...

    async def stat(self, path: str) -> FileStat:
        """Return kind, size and mtime of ``path``."""
        ...

    async def exists(self, path: str) -> bool:
        """True when ``path`` exists and is inside the roots."""
        ...

    async def mkdir(self, path: str, *, parents: bool = True) -> str:
        """Create a directory (and missing parents); an existing directory is fine."""
        ...

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file or symlink, or a directory (empty, or any with ``recursive``)."""
        ...

    async def glob(self, pattern: str) -> list[str]:
        """Paths under the workspace matching ``pattern`` (``**`` spans directories), sorted."""
        ...
