"""The write-budget watchdog survives the host changing under it (docs/sandbox.md): a workspace
removed by an operator, scans that fail with ``EMFILE``. Neither ends the tree nor raises out
of the sandbox; the budget is enforced again once scans work."""

from __future__ import annotations

import errno
import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from sagents.sandbox import Sandbox, SandboxParams, create_sandbox
from sagents.sandbox import _hostfs as hostfs
from sagents.sandbox._diskuse import directory_usage_bytes
from tests.sandbox.conftest import TEST_LIMITS

pytestmark = pytest.mark.anyio

_WATCHDOG_LOGGER = "sagents.sandbox._process"


class _LogEvents(logging.Handler):
    """Sets an event once a record whose message contains its key is logged."""

    def __init__(self, *keys: str) -> None:
        super().__init__(logging.WARNING)
        self.events = {key: anyio.Event() for key in keys}
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.messages.append(message)
        for key, event in self.events.items():
            if key in message:
                event.set()


@contextmanager
def _watch_logs(*keys: str) -> Iterator[_LogEvents]:
    handler = _LogEvents(*keys)
    logger = logging.getLogger(_WATCHDOG_LOGGER)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _sandbox(workspace: Path) -> Sandbox:
    return create_sandbox("local", SandboxParams(workspace=str(workspace), limits=TEST_LIMITS))


async def test_a_workspace_removed_under_a_running_tree_ends_only_the_budget_watch(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    with _watch_logs("is gone") as logs, anyio.fail_after(60):
        async with (
            _sandbox(workspace) as sandbox,
            sandbox.spawn(
                ["sh", "-c", "echo ready; read line; echo still here"], stdin=True
            ) as proc,
        ):
            assert proc.stdin is not None
            assert proc.stdout is not None
            output = b""
            while b"ready\n" not in output:  # started inside its workspace
                output += await proc.stdout.receive()
            shutil.rmtree(workspace)  # an operator cleans up while the tree runs
            await logs.events["is gone"].wait()
            assert proc.returncode is None  # the tree goes on
            await proc.stdin.send(b"go\n")
            async for chunk in proc.stdout:
                output += chunk
            assert await proc.wait() == 0
    assert output == b"ready\nstill here\n"
    assert any("write budget is no longer measured" in m for m in logs.messages)


async def test_scans_failing_with_emfile_are_retried_and_the_budget_still_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exhausted = True

    def usage(root: str) -> int:
        if exhausted:  # what os.open answers once the process has no descriptor left
            raise OSError(errno.EMFILE, "Too many open files")
        return directory_usage_bytes(root)

    monkeypatch.setattr(hostfs, "directory_usage_bytes", usage)
    write = "read line; head -c 20000000 /dev/zero > big; read never"  # 20 MB > 8 MiB budget
    with _watch_logs("retrying", "measured again") as logs, anyio.fail_after(60):
        async with (
            _sandbox(tmp_path / "ws") as sandbox,
            sandbox.spawn(["sh", "-c", write], stdin=True) as proc,
        ):
            await logs.events["retrying"].wait()
            assert proc.returncode is None
            exhausted = False  # descriptors are back
            await logs.events["measured again"].wait()
            assert proc.stdin is not None
            await proc.stdin.send(b"go\n")
            await proc.wait()
            assert proc.killed_reason == "write_budget"
    retrying = [m for m in logs.messages if "retrying" in m]
    assert len(retrying) == 1  # said once while it lasts, not at every scan
    assert "Too many open files" in retrying[0]
