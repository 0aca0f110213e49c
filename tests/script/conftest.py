"""Fixtures of the run_script tests: a fake tool set, an installed runtime, a runner factory."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.core._permissions import PermissionClass
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.script._launcher import PlainLauncher
from sagents.script._runner import ScriptRunner
from sagents.script._runtime import ScriptRuntime, install_runtime
from sagents.script._values import ScriptProgressUpdate
from sagents.tool._approval import AllowAllApprover, Approver


def _spec(name: str, permission: PermissionClass, description: str = "") -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description or f"{name} tool.\nMore text.",
        input_schema={"type": "object", "properties": {"sn": {"type": "string"}}},
        permission=permission,
        source=ToolSource(kind="mcp", server="fleet", original_name=name.split("__")[-1]),
    )


SPECS: list[ToolSpec] = [
    _spec("fleet__get", "read_only", "Get one device's status."),
    _spec("fleet__text", "read_only", "Returns plain text."),
    _spec("fleet__fail", "read_only", "Always reports an error."),
    _spec("fleet__set", "write", "Change a device's config."),
    _spec("fleet__reboot", "destructive", "Reboot a device."),
    _spec("fleet__long", "long_task_only", "A long task."),
    _spec("fleet__off", "disabled", "Disabled."),
    ToolSpec(name="shell", permission="write", source=ToolSource(kind="builtin")),
]


@dataclass(kw_only=True)
class FakeTools:
    """A fake ``call_tool`` that records every call and the peak number in flight."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    started: anyio.Event = field(default_factory=anyio.Event)
    block: anyio.Event | None = None  # when set, ``fleet__get`` waits for it
    cancelled: int = 0

    async def __call__(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((name, arguments))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.started.set()
        try:
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            if self.block is not None and name == "fleet__get":
                await self.block.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        if name == "fleet__fail":
            return ToolResult.from_text(f"device {arguments.get('sn')} is offline", is_error=True)
        if name == "fleet__text":
            return ToolResult.from_text(f"plain {arguments.get('sn')}")
        if name == "fleet__boom":
            raise RuntimeError("boom")
        return ToolResult.from_structured({"sn": arguments.get("sn"), "tool": name})


@pytest.fixture(scope="session")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> ScriptRuntime:
    return install_runtime(tmp_path_factory.mktemp("data"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def tools() -> FakeTools:
    return FakeTools()


RunnerFactory = Callable[..., ScriptRunner]

RUN_TIME_ONLY = ScriptLimits(timeout_s=60.0, preflight=False)
"""Limits for a test of the run-time refusal of a call the pre-flight would refuse before the
run (a tool name the source does not fix still reaches it; docs/run_script.md, "Pre-flight
check")."""


@pytest.fixture
def make_runner(runtime: ScriptRuntime, workspace: Path, tools: FakeTools) -> RunnerFactory:
    def make(
        *,
        mode: str = "auto",
        approver: Approver | None = None,
        limits: ScriptLimits | None = None,
        progress: list[ScriptProgressUpdate] | None = None,
        **kwargs: Any,
    ) -> ScriptRunner:
        kwargs.setdefault("launcher", PlainLauncher())  # the runner core; sandbox: test_sandboxed_*
        return ScriptRunner(
            specs=SPECS,
            call_tool=tools,
            workspace=workspace,
            runtime=runtime,
            mode=mode,  # type: ignore[arg-type]  # tests pass valid literals
            approver=approver or AllowAllApprover(),
            limits=limits or ScriptLimits(timeout_s=60.0),
            on_progress=progress.append if progress is not None else None,
            **kwargs,
        )

    return make


def read_calls(workspace: Path, records_dir: str) -> list[dict[str, Any]]:
    """The lines of a run's calls.jsonl."""
    text = (workspace / records_dir / "calls.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]
