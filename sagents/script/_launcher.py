"""The seam between run_script and the process that runs a script
(docs/run_script.md, "How it runs").

:class:`Launcher` is what the runner needs from a sandbox: start the bootstrap with the request
and reply pipe ends passed as extra descriptors, stdout/stderr as pipes, nothing else inherited;
wait for it; kill its whole tree. The sandbox layer's bubblewrap provider implements it for real.
:class:`PlainLauncher` is the stand-in used until then and in tests: an ordinary subprocess in
its own session, **no isolation** (no namespaces, full host filesystem and network).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio
from anyio.abc import ByteReceiveStream, Process

from sagents.script._protocol import FDS_ENV
from sagents.script._runtime import bootstrap_argv

__all__ = ["LaunchSpec", "Launcher", "PlainLauncher", "PlainProcess", "ScriptProcess"]


@dataclass(frozen=True, kw_only=True)
class LaunchSpec:
    """What to run, in host paths (a sandbox maps them to its own).

    Attributes:
        bootstrap: ``<data dir>/script-runtime/bootstrap.py`` (bind its directory read-only).
        script: The records' ``script.py``.
        workspace: The session workspace; the script's current directory.
        read_only_workspace: True in ``read_only`` permission mode.
        env: Variables to set for the script (on top of the launcher's minimal environment).
    """

    bootstrap: Path
    script: Path
    workspace: Path
    read_only_workspace: bool = False
    env: Mapping[str, str] = field(default_factory=dict)


class ScriptProcess(Protocol):
    """A started script. ``stdout`` and ``stderr`` are the script's own output pipes."""

    @property
    def stdout(self) -> ByteReceiveStream:
        """The script's standard output."""
        ...

    @property
    def stderr(self) -> ByteReceiveStream:
        """The script's standard error."""
        ...

    async def wait(self) -> int:
        """Wait for the process to exit; return its exit code (negative: killed by a signal)."""
        ...

    async def kill_tree(self) -> None:
        """Kill the process and every process it started (grandchildren included)."""
        ...

    async def aclose(self) -> None:
        """Release what the launch holds (called once, after :meth:`kill_tree` and
        :meth:`wait`, in the task that launched)."""
        ...


class Launcher(Protocol):
    """Starts scripts; the sandbox's implementation isolates them."""

    async def launch(self, spec: LaunchSpec, *, request_fd: int, reply_fd: int) -> ScriptProcess:
        """Start the bootstrap on ``spec.script``.

        Args:
            spec: What to run.
            request_fd: The write end of the request pipe, to become the script's fd 3.
            reply_fd: The read end of the reply pipe, to become the script's fd 4.

        Returns:
            The started process. The caller closes its own copies of the two fds afterwards.

        Raises:
            sagents.errors.SandboxError: when the process cannot be started.
        """
        ...


def _descendants(root: int) -> list[int]:
    """Pids of every live descendant of ``root`` (from /proc; empty where /proc is missing)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


@dataclass(kw_only=True)
class PlainProcess:
    """A :class:`ScriptProcess` over an anyio subprocess started in its own session."""

    process: Process

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
        """Wait for the exit code."""
        return await self.process.wait()

    async def kill_tree(self) -> None:
        """SIGKILL the process group and every descendant found in /proc.

        Descendants that left the group (``start_new_session=True``) are found by parent pid
        while their parent lives; a real sandbox (a pid namespace) catches every one.
        """
        pid = self.process.pid
        for _ in range(3):  # a process may fork while we walk; repeat until nothing is left
            targets = _descendants(pid)
            for target in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(target, signal.SIGSTOP)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            for target in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(target, signal.SIGKILL)
            if not targets:
                break

    async def aclose(self) -> None:
        """Nothing to release: the subprocess was reaped by :meth:`wait`."""


@dataclass(frozen=True, kw_only=True)
class PlainLauncher:
    """Runs scripts as plain subprocesses of the host: NO ISOLATION (tests, trusted setups).

    Attributes:
        python: The interpreter; the host's own by default.
        path: ``PATH`` given to the script.
    """

    python: str | None = None
    path: str = "/usr/local/bin:/usr/bin:/bin"

    async def launch(self, spec: LaunchSpec, *, request_fd: int, reply_fd: int) -> ScriptProcess:
        """Start the script in a new session with exactly fds 0-4 (see :class:`Launcher`)."""
        env = {"PATH": self.path, "LANG": "C.UTF-8", "HOME": str(spec.workspace)}
        env.update(spec.env)
        env[FDS_ENV] = f"{request_fd},{reply_fd}"
        argv = bootstrap_argv(str(spec.bootstrap), str(spec.script), python=self.python)
        process = await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.workspace,
            env=env,
            start_new_session=True,
            pass_fds=(request_fd, reply_fd),
        )
        return PlainProcess(process=process)
