"""The ``memory`` provider: a sandbox whose files live in this process, not on the host.

It exists so that code above the sandbox layer (built-in file tools, the skill projection) is
tested against a sandbox whose paths are *not* host paths, as a remote one's would be
(docs/sandbox.md, "Paths are sandbox paths"). What it supports:

- the whole file API (files and directories; no symlinks);
- ``run`` and ``start`` of a small built-in command set: ``true``, ``false``, ``echo ARGS...``,
  ``cat PATH...`` (files of the sandbox), ``pwd``, and ``printf-bytes HEX`` (writes raw bytes,
  for UTF-8 tests). Any other program exits 127 with ``command not found`` on stderr;
- background tasks end at once (their output is in their log when ``start`` returns);
- no ``spawn`` (``describe().supports_spawn`` is False): it raises SandboxError.
"""

from __future__ import annotations

import posixpath
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager

import anyio
import anyio.to_thread

from sagents.errors import PathNotAllowedError, SandboxError, TaskNotFoundError
from sagents.sandbox._background import BackgroundTask
from sagents.sandbox._patterns import glob_regex
from sagents.sandbox._protocol import SandboxProcess
from sagents.sandbox._types import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CompletedRun,
    DirEntry,
    FileStat,
    ReadOnlyBind,
    SandboxInfo,
    SandboxParams,
    TaskStatus,
)
from sagents.sandbox._utf8 import decode_utf8_window

__all__ = ["MemorySandbox"]

_ERRNO_ENOENT = 2


class MemorySandbox:
    """An in-memory sandbox (see the module docstring for what it supports).

    Args:
        params: ``workspace_path``, ``mode``, ``read_only_subpaths`` and ``limits`` are used;
            ``workspace`` (a host path) is ignored.
    """

    def __init__(self, params: SandboxParams) -> None:
        self.params = params
        self._root = posixpath.normpath(params.workspace_path)
        self._files: dict[str, tuple[bytes, float]] = {}
        self._dirs: dict[str, float] = {self._root: time.time()}
        self._tasks: dict[str, BackgroundTask] = {}
        self._logs: dict[str, bytes] = {}

    async def __aenter__(self) -> MemorySandbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Forget the background tasks (they have all ended)."""
        self._tasks.clear()
        self._logs.clear()

    def describe(self) -> SandboxInfo:
        """An in-memory sandbox: no host files, a built-in command set only."""
        return SandboxInfo(
            kind="memory",
            isolation="in_memory",
            workspace=self._root,
            mode=self.params.mode,
            cgroups=False,
            runs_programs=False,
            supports_spawn=False,
            python=None,
            limits=self.params.limits,
            warnings=("memory: runs only the built-in commands true, false, echo, cat, pwd",),
        )

    # -- paths -----------------------------------------------------------------------------

    def _norm(self, path: str) -> str:
        if not isinstance(path, str) or "\x00" in path:
            raise PathNotAllowedError(f"invalid path {path!r}", details={"path": repr(path)})
        full = posixpath.normpath(path if path.startswith("/") else f"{self._root}/{path}")
        if full.startswith("//"):
            full = full[1:]
        if full != self._root and not full.startswith(self._root + "/"):
            raise PathNotAllowedError(
                f"{path!r} is outside the sandbox root {self._root!r}",
                hint="use a path inside the workspace",
                details={"path": path},
            )
        return full

    def _writable(self, path: str, full: str) -> None:
        if self.params.mode != "read_write":
            raise PathNotAllowedError(f"{path!r}: the sandbox is read-only", details={"path": path})
        rel = full[len(self._root) + 1 :]
        for sub in self.params.read_only_subpaths:
            sub = sub.strip("/")
            if rel == sub or rel.startswith(sub + "/"):
                raise PathNotAllowedError(
                    f"{path!r} is inside the read-only {sub!r}", details={"path": path}
                )

    def _need_parent_dir(self, full: str, path: str) -> None:
        parent = posixpath.dirname(full)
        if parent in self._files:
            raise NotADirectoryError(20, "not a directory", path)
        if parent not in self._dirs:
            raise FileNotFoundError(_ERRNO_ENOENT, "no such directory", path)

    # -- files -------------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        """Return the file's bytes."""
        full = self._norm(path)
        if full in self._dirs:
            raise IsADirectoryError(21, "is a directory", path)
        if full not in self._files:
            raise FileNotFoundError(_ERRNO_ENOENT, "no such file", path)
        return self._files[full][0]

    async def write_file(self, path: str, data: bytes) -> str:
        """Store ``data`` at ``path`` (the parent directory must exist)."""
        full = self._norm(path)
        self._writable(path, full)
        if full in self._dirs:
            raise IsADirectoryError(21, "is a directory", path)
        self._need_parent_dir(full, path)
        self._files[full] = (bytes(data), time.time())
        return full

    async def list_dir(self, path: str) -> list[DirEntry]:
        """List a directory's entries, sorted by name."""
        full = self._norm(path)
        if full in self._files:
            raise NotADirectoryError(20, "not a directory", path)
        if full not in self._dirs:
            raise FileNotFoundError(_ERRNO_ENOENT, "no such directory", path)
        entries = [
            DirEntry(name=posixpath.basename(p), kind="file", size=len(d))
            for p, (d, _) in self._files.items()
            if posixpath.dirname(p) == full
        ]
        entries += [
            DirEntry(name=posixpath.basename(p), kind="dir", size=0)
            for p in self._dirs
            if p != full and posixpath.dirname(p) == full
        ]
        return sorted(entries, key=lambda e: e.name)

    async def stat(self, path: str) -> FileStat:
        """Kind, size and mtime of ``path``."""
        full = self._norm(path)
        if full in self._files:
            data, mtime = self._files[full]
            return FileStat(path=full, kind="file", size=len(data), mtime=mtime)
        if full in self._dirs:
            return FileStat(path=full, kind="dir", size=0, mtime=self._dirs[full])
        raise FileNotFoundError(_ERRNO_ENOENT, "no such file or directory", path)

    async def exists(self, path: str) -> bool:
        """True when ``path`` exists inside the root."""
        try:
            full = self._norm(path)
        except PathNotAllowedError:
            return False
        return full in self._files or full in self._dirs

    async def mkdir(self, path: str, *, parents: bool = True) -> str:
        """Create a directory (and missing parents with ``parents``)."""
        full = self._norm(path)
        self._writable(path, full)
        chain: list[str] = []
        current = full
        while current not in self._dirs:
            if current in self._files:
                raise FileExistsError(17, "a file is in the way", current)
            chain.append(current)
            current = posixpath.dirname(current)
        if len(chain) > 1 and not parents:
            raise FileNotFoundError(_ERRNO_ENOENT, "no such directory", posixpath.dirname(full))
        for directory in reversed(chain):
            self._dirs[directory] = time.time()
        return full

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, or a directory (empty, or any with ``recursive``)."""
        full = self._norm(path)
        self._writable(path, full)
        if full == self._root:
            raise PathNotAllowedError(f"{path!r}: the root itself cannot be removed")
        if full in self._files:
            del self._files[full]
            return
        if full not in self._dirs:
            raise FileNotFoundError(_ERRNO_ENOENT, "no such file or directory", path)
        inside = [p for p in (*self._files, *self._dirs) if p.startswith(full + "/")]
        if inside and not recursive:
            raise OSError(39, "directory not empty", path)
        for p in inside:
            self._files.pop(p, None)
            self._dirs.pop(p, None)
        del self._dirs[full]

    async def glob(self, pattern: str) -> list[str]:
        """Paths matching ``pattern`` relative to the root, sorted."""
        if pattern.startswith("/"):
            pattern = self._norm(pattern)[len(self._root) + 1 :]
        if ".." in pattern.split("/"):
            raise PathNotAllowedError(f"glob pattern {pattern!r} may not contain '..'")
        regex = glob_regex(pattern)
        start = len(self._root) + 1
        paths = [p for p in (*self._files, *self._dirs) if p != self._root]

        def matching() -> list[str]:
            return sorted(p for p in paths if regex.fullmatch(p[start:]))

        # RE2 is linear in the path, not in the pattern (docs/security.md, "Patterns others
        # wrote"): matched in a worker thread, where RE2 lets go of the interpreter.
        return await anyio.to_thread.run_sync(matching)

    # -- programs -----------------------------------------------------------------------------

    async def _builtin(self, argv: Sequence[str]) -> tuple[int, bytes, bytes]:
        if not argv:
            raise ValueError("argv must name a program")
        name, args = argv[0], list(argv[1:])
        if name == "true":
            return 0, b"", b""
        if name == "false":
            return 1, b"", b""
        if name == "pwd":
            return 0, (self._root + "\n").encode(), b""
        if name == "echo":
            return 0, (" ".join(args) + "\n").encode(), b""
        if name == "printf-bytes":
            if not args or not re.fullmatch(r"(?:[0-9a-fA-F]{2})*", args[0]):
                return 2, b"", b"printf-bytes: expected one hex string\n"
            return 0, bytes.fromhex(args[0]), b""
        if name == "cat":
            out = bytearray()
            for arg in args:
                try:
                    out += await self.read_file(arg)
                except (FileNotFoundError, IsADirectoryError, PathNotAllowedError) as exc:
                    return 1, bytes(out), f"cat: {arg}: {exc}\n".encode()
            return 0, bytes(out), b""
        return 127, b"", f"{name}: command not found\n".encode()

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
        """Run a built-in command (see the module docstring)."""
        cap = DEFAULT_MAX_OUTPUT_BYTES if max_output_bytes is None else max_output_bytes
        if cap < 0:
            raise ValueError(f"max_output_bytes must be >= 0, got {max_output_bytes!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        code, out, err = await self._builtin(argv)
        return CompletedRun(
            exit_code=code,
            stdout=out[:cap],
            stderr=err[:cap],
            stdout_truncated=len(out) > cap,
            stderr_truncated=len(err) > cap,
        )

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> str:
        """Run a built-in command as a background task (it ends at once)."""
        code, out, err = await self._builtin(argv)
        task_id = uuid.uuid4().hex[:12]
        task = BackgroundTask(task_id=task_id, argv=tuple(argv), log_path=f"memory:{task_id}")
        task.exit_code = code
        task.done.set()
        self._logs[task_id] = out + err
        self._tasks[task_id] = task
        return task_id

    def _task(self, task_id: str) -> BackgroundTask:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFoundError(f"no background task {task_id!r}", details={"task_id": task_id})
        return task

    async def status(self, task_id: str) -> TaskStatus:
        """The task's status (always ended)."""
        base = self._task(task_id).status()
        return TaskStatus(
            task_id=base.task_id,
            argv=base.argv,
            state=base.state,
            exit_code=base.exit_code,
            output_bytes=len(self._logs[task_id]),
            log_path=base.log_path,
        )

    async def wait(
        self,
        task_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> TaskStatus:
        """The task's status (tasks end at once)."""
        return await self.status(task_id)

    async def kill(self, task_id: str) -> TaskStatus:
        """Nothing to kill: tasks end at once."""
        return await self.status(task_id)

    async def read_background_output_range(
        self, task_id: str, offset: int, max_bytes: int
    ) -> tuple[str, int]:
        """Read the task's log from ``offset`` without splitting UTF-8."""
        self._task(task_id)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset!r}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes!r}")
        data = self._logs[task_id][offset : offset + max_bytes + 3]
        text, used = decode_utf8_window(data, max_bytes, final=len(data) <= max_bytes)
        return text, offset + used

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
        """Not supported: the memory provider runs no real processes.

        Raises:
            SandboxError: always.
        """
        raise SandboxError(
            "the 'memory' sandbox cannot spawn processes",
            hint="use the 'local' sandbox for run_script",
        )
