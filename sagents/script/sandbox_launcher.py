"""The sandbox :class:`~sagents.script.launcher.Launcher`: run_script on ``Sandbox.spawn``
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
"""

from __future__ import annotations

import dataclasses
import os
import signal
from contextlib import AsyncExitStack
from dataclasses import dataclass

from anyio.abc import ByteReceiveStream

from sagents.errors import SandboxError
from sagents.sandbox.local import LocalSandbox
from sagents.sandbox.protocol import Sandbox, SandboxProcess
from sagents.sandbox.types import ReadOnlyBind
from sagents.script.launcher import LaunchSpec, ScriptProcess
from sagents.script.protocol import FDS_ENV
from sagents.script.runtime import bootstrap_argv

__all__ = ["RUNTIME_MOUNT", "SandboxLauncher", "SandboxScriptProcess"]

RUNTIME_MOUNT = "/opt/sagents/script-runtime"
"""Where the runtime directory appears inside bubblewrap (read-only)."""

_MAX_SIGNAL = 64


@dataclass(kw_only=True)
class SandboxScriptProcess:
    """A :class:`~sagents.script.launcher.ScriptProcess` over a :class:`SandboxProcess`.

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
        code = await self.process.wait()
        if self.process.killed_reason == "write_budget":
            return -int(signal.SIGKILL)
        if self.isolated and 128 < code <= 128 + _MAX_SIGNAL:
            return -(code - 128)
        return code

    async def kill_tree(self) -> None:
        """End the whole tree (PID namespace, cgroup, process group) and reap it."""
        await self.process.kill("killed")

    async def aclose(self) -> None:
        """Leave the ``spawn`` context: kill what is left, close the pipes, free the cgroup."""
        await self.stack.aclose()


def _relative_script(spec: LaunchSpec) -> tuple[str, str]:
    """``(real host workspace, script path relative to it)``; raises SandboxError outside."""
    host_ws = os.path.realpath(spec.workspace)
    script_rel = os.path.relpath(os.path.realpath(spec.script), host_ws)
    if script_rel.startswith(".."):
        raise SandboxError(f"the script {spec.script} is not inside the workspace")
    return host_ws, script_rel


class SandboxLauncher:
    """Starts run_script's bootstrap inside a :class:`~sagents.sandbox.Sandbox`.

    Args:
        sandbox: The session's sandbox (``local``: bubblewrap; ``passthrough``: no isolation,
            only when asked for by name). It must support ``spawn`` and run Python.
        timeout_s: The sandbox's own wall-clock bound per run, in seconds; give it a little more
            than ``scripts.timeoutSec`` so the runner's timeout fires first. None: the
            sandbox's ``wall_timeout_seconds``.

    Raises:
        SandboxError: when the sandbox cannot spawn or has no Python.
    """

    def __init__(self, sandbox: Sandbox, *, timeout_s: float | None = None) -> None:
        info = sandbox.describe()
        if not info.supports_spawn or info.python is None:
            raise SandboxError(
                f"the {info.kind!r} sandbox cannot run scripts (no spawn or no Python)",
                hint="run_script needs the 'local' sandbox (bubblewrap)",
            )
        self._sandbox = sandbox
        self._read_only: Sandbox | None = sandbox if info.mode == "read_only" else None
        self._timeout_s = timeout_s

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox scripts run in."""
        return self._sandbox

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

    async def launch(self, spec: LaunchSpec, *, request_fd: int, reply_fd: int) -> ScriptProcess:
        """Start the bootstrap on ``spec.script`` with the pipes as fds 3 and 4 (see
        :class:`~sagents.script.launcher.Launcher`).

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
        argv = bootstrap_argv(
            f"{runtime_inside}/{spec.bootstrap.name}",
            f"{workspace}/{script_rel}",
            python=info.python,
        )
        env = dict(spec.env)
        env[FDS_ENV] = "3,4"
        stack = AsyncExitStack()
        process = await stack.enter_async_context(
            sandbox.spawn(
                argv,
                cwd=workspace,
                env=env,
                extra_fds={3: request_fd, 4: reply_fd},
                extra_ro_binds=[ReadOnlyBind(host_path=runtime_host, sandbox_path=runtime_inside)],
                timeout=self._timeout_s,
            )
        )
        return SandboxScriptProcess(process=process, isolated=isolated, stack=stack)
