"""RunScriptTool: run_script for a session, through a ToolManager, the sandbox and the hub."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagents.audit._store import AuditEntry, AuditStore, SqliteAuditStore
from sagents.core._limits import ScriptLimits
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSource, ToolSpec
from sagents.core.events import BackgroundDoneEvent, Event, ScriptProgressEvent
from sagents.errors import SandboxError
from sagents.progress._clock import ManualClock
from sagents.progress._hub import ProgressHub
from sagents.sandbox import LocalSandbox, SandboxParams, create_sandbox
from sagents.script._records import ScriptRecords
from sagents.script._runtime import ScriptRuntime
from sagents.script._session import RunScriptSettings, RunScriptTool
from sagents.store import parse_store_url
from sagents.store._postgres import PostgresStore
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest
from sagents.tool._background import BackgroundTasks
from sagents.tool._context import SessionContext
from sagents.tool._handler import ToolCall
from sagents.tool._tool_proxy import ToolProxy
from sagents.tool.questions import Questioner, Questionnaire, QuestionnaireAnswer
from sagents.tool.tool_base import tool
from sagents.tool.tool_manager import ToolManager
from tests.postgres_server import PostgresServer
from tests.small_disk import fill_disk

pytestmark = pytest.mark.anyio

SESSION = "s-1"


class RecordingHub(ProgressHub):
    """A hub that also keeps every event it was given (the queues coalesce snapshots)."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        super().__init__(clock=clock)
        self.events: list[tuple[str, Event]] = []
        self.changed = anyio.Event()

    def publish(self, session_id: str, event: Event) -> None:
        self.events.append((session_id, event))
        self.changed.set()
        self.changed = anyio.Event()
        super().publish(session_id, event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [event for sid, event in self.events if isinstance(event, kind) and sid == SESSION]

    async def wait_for(self, kind: type[Any], count: int = 1) -> list[Any]:
        with anyio.fail_after(60):
            while len(self.of(kind)) < count:
                await self.changed.wait()
        return self.of(kind)


@dataclass
class ListAudit:
    entries: list[AuditEntry] = field(default_factory=list)

    async def record(self, entry: AuditEntry) -> None:
        self.entries.append(entry)


@dataclass
class RecordingApprover:
    requests: list[ApprovalRequest] = field(default_factory=list)

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return "allow_once"


@dataclass
class Fleet:
    """MCP-sourced tools as ``(ToolSpec, handler)`` pairs; ``fleet__block`` waits for ``gate``."""

    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    gate: anyio.Event = field(default_factory=anyio.Event)
    blocked: anyio.Event = field(default_factory=anyio.Event)

    def register(self, manager: ToolManager) -> None:
        for name, permission in (
            ("fleet__get", "read_only"),
            ("fleet__set", "write"),
            ("fleet__block", "read_only"),
        ):
            spec = ToolSpec(
                name=name,
                description=f"{name} of the fleet.",
                input_schema={"type": "object", "properties": {"sn": {"type": "string"}}},
                permission=permission,  # type: ignore[arg-type]  # valid literals
                source=ToolSource(kind="mcp", server="fleet", original_name=name[7:]),
            )
            manager.register_tool((spec, self._handler(name)))

    def _handler(self, name: str) -> Any:
        async def handle(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
            self.calls.append((name, arguments, call.session_context.session_id))
            if name == "fleet__block":
                self.blocked.set()
                await self.gate.wait()
            return ToolResult.from_structured({"sn": arguments.get("sn"), "tool": name})

        return handle


@tool
def local_echo(text: str) -> str:
    """Echo a text (a local write tool: callable from scripts only when listed)."""
    return text


@dataclass
class Setup:
    manager: ToolManager
    fleet: Fleet
    hub: RecordingHub
    audit: ListAudit
    approver: RecordingApprover
    workspace: Path
    runtime: ScriptRuntime

    def tool(
        self,
        *,
        mode: str = "auto",
        background_after_s: float | None = None,
        background: BackgroundTasks | None = None,
        audit: AuditStore | None = None,
        questioner: Questioner | None = None,
    ) -> RunScriptTool:
        session = SessionContext(
            session_id=SESSION,
            permission_mode=mode,  # type: ignore[arg-type]  # a valid literal
            questioner=questioner,
        )
        return RunScriptTool(
            tools=ToolProxy(self.manager),  # the run is decided once: its calls carry it
            session=session,
            sandbox=LocalSandbox(SandboxParams(workspace=str(self.workspace))),
            runtime=self.runtime,
            approver=self.approver,
            settings=RunScriptSettings(
                limits=ScriptLimits(timeout_s=60.0), background_after_s=background_after_s
            ),
            hub=self.hub,
            audit=audit or self.audit,
            background=background,
        )


@pytest.fixture
async def setup(runtime: ScriptRuntime, workspace: Path) -> AsyncIterator[Setup]:
    async with ToolManager() as manager:
        fleet = Fleet()
        fleet.register(manager)
        manager.register_tool(local_echo)
        yield Setup(
            manager=manager,
            fleet=fleet,
            hub=RecordingHub(),
            audit=ListAudit(),
            approver=RecordingApprover(),
            workspace=workspace,
            runtime=runtime,
        )


async def test_run_script_is_offered_only_with_mcp_tools(setup: Setup) -> None:
    run_script = setup.tool()
    assert run_script.should_offer()
    names = sorted(spec.name for spec in run_script.callable_specs())
    assert names == ["fleet__block", "fleet__get", "fleet__set", "local_echo"]  # docs/run_script.md
    description = run_script.spec().description
    assert "\nfleet:\n" in description
    assert "\n  get(*, sn: str = ...)\n" in description
    async with ToolManager() as only_local:
        only_local.register_tool(local_echo)
        bare = RunScriptTool(
            tools=only_local,
            session=SessionContext(session_id=SESSION),
            sandbox=LocalSandbox(SandboxParams(workspace=str(setup.workspace))),
            runtime=setup.runtime,
        )
        assert not bare.should_offer()


async def test_a_script_calls_tools_through_the_session_path_and_writes_one_audit_entry(
    setup: Setup,
) -> None:
    code = (
        "from agent_tools import call, ToolError\n"
        "print(call('fleet__get', {'sn': 'A1'})['tool'])\n"
        "for name in ('local_echo', 'run_script', 'fleet__set'):\n"
        "    try:\n"
        "        call(name, {'text': 'x'})\n"
        "        print(name, 'called')\n"
        "    except ToolError as exc:\n"
        "        print(name, 'refused', exc.code)\n"
    )
    async with setup.tool() as run_script:
        with anyio.fail_after(60):
            result = await run_script.run(code, [], "calls", tool_call_id="tc-1")
    assert not result.is_error, result.text
    lines = result.text.splitlines()[1:]
    assert lines[0] == "fleet__get"
    assert all("refused" in line for line in lines[1:]), result.text
    assert setup.fleet.calls == [("fleet__get", {"sn": "A1"}, SESSION)]
    assert len(setup.audit.entries) == 1
    entry = setup.audit.entries[0]
    assert entry.tool == "run_script"
    assert entry.session_id == SESSION
    assert entry.data["calls"] == 4
    assert result.structured["status"] == "ok"
    assert result.structured["audit"] == "written"
    assert "audit not written" not in result.text


async def test_a_run_whose_audit_row_cannot_be_written_is_answered_saying_so(
    setup: Setup, small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The run happened, so it is answered; but never as a plain ``ok`` without its row."""
    audit = SqliteAuditStore(path=small_disk / "audit.sqlite3")
    await audit.record(AuditEntry(kind="gateway_call", ts=0.0, tool="run_script", status="ok"))
    fill_disk(small_disk)
    code = "from agent_tools import call\nprint(call('fleet__get', {'sn': 'A1'})['tool'])\n"
    with caplog.at_level(logging.WARNING, logger="sagents.script"):
        async with setup.tool(audit=audit) as run_script:
            with anyio.fail_after(60):
                result = await run_script.run(code + "#" + "x" * 65536, [], "full disk")
    audit.close()
    summary = result.text.splitlines()[0]
    assert summary.startswith("run_script ok: 1 call, 0 failed"), result.text
    assert re.search(r", audit not written: .*full[^\n]*$", summary), summary
    assert result.structured["status"] == "ok"
    assert result.structured["audit"] == "missing"
    assert setup.fleet.calls == [("fleet__get", {"sn": "A1"}, SESSION)]
    logged = [r.getMessage() for r in caplog.records if "audit not written" in r.getMessage()]
    assert len(logged) == 1, caplog.text
    assert result.structured["script_id"] in logged[0]


async def test_the_registered_tool_runs_through_the_tool_manager(setup: Setup) -> None:
    code = "from agent_tools import call\nprint(call('fleet__get', {'sn': 'Z'}))"
    async with setup.tool() as run_script:
        setup.manager.register_tool(run_script.as_tool())
        with anyio.fail_after(60):
            result = await setup.manager.run_tool(
                "run_script",
                {"code": code, "tools": [], "description": "one call"},
                SessionContext(session_id="other"),
            )
            missing = await setup.manager.run_tool("run_script", {"code": code})
    assert missing.is_error
    assert missing.error is not None
    assert missing.error.code == "invalid_arguments"
    assert not result.is_error, result.text
    assert "'sn': 'Z'" in result.text
    assert setup.fleet.calls[0][2] == SESSION  # the tool's own session, not the caller's


async def test_write_tools_are_approved_through_the_approver_in_ask_mode(setup: Setup) -> None:
    code = "from agent_tools import call\nprint(call('fleet__set', {'sn': 'A'})['tool'])\n"
    async with setup.tool(mode="ask") as run_script:
        with anyio.fail_after(60):
            result = await run_script.run(code, ["fleet__set"], "reconfigure")
    assert not result.is_error, result.text
    assert [request.tools for request in setup.approver.requests] == [("fleet__set",)]
    assert setup.approver.requests[0].session_id == SESSION


async def test_progress_is_throttled_and_the_last_value_is_delivered(
    runtime: ScriptRuntime, workspace: Path, setup: Setup
) -> None:
    setup.hub = RecordingHub(clock=ManualClock())  # never advanced: one window for the run
    code = (
        "from agent_tools import progress\n"
        "for i in range(1, 51):\n"
        "    progress(i, 50, f'step {i}')\n"
        "print('done')\n"
    )
    async with setup.tool() as run_script:
        with anyio.fail_after(60):
            result = await run_script.run(code, [], "progress")
    assert not result.is_error, result.text
    events: list[ScriptProgressEvent] = setup.hub.of(ScriptProgressEvent)
    running = [event for event in events if event.status == "running"]
    assert len(running) == 1  # the first at once; the others wait for a (manual) second
    assert events[-1].status == "ok"
    assert (events[-1].done, events[-1].total, events[-1].message) == (50, 50, "step 50")


async def test_a_long_run_is_handed_off_and_announced_when_done(setup: Setup) -> None:
    code = "from agent_tools import call\nprint('got', call('fleet__block', {'sn': 'L'})['sn'])\n"
    async with setup.tool(background_after_s=0.0) as run_script:
        with anyio.fail_after(60):
            handed = await run_script.run(code, [], "long", tool_call_id="tc-9")
        task_id = handed.structured["task_id"]
        assert handed.structured["status"] == "running"
        assert task_id in handed.text
        listed = run_script.background.list(SESSION)
        assert [(info.task_id, info.status) for info in listed] == [(task_id, "running")]
        with anyio.fail_after(60):
            await setup.fleet.blocked.wait()
        setup.fleet.gate.set()
        done: list[BackgroundDoneEvent] = await setup.hub.wait_for(BackgroundDoneEvent)
        info = run_script.background.get(SESSION, task_id)
    assert (done[0].handle, done[0].status, done[0].tool_call_id) == (task_id, "ok", "tc-9")
    assert "got L" in done[0].text
    assert info.status == "ok"
    assert len(setup.audit.entries) == 1


async def test_a_background_run_can_be_cancelled_cleanly(setup: Setup) -> None:
    code = "from agent_tools import call\ncall('fleet__block', {})\nprint('never')\n"
    async with setup.tool(background_after_s=0.0) as run_script:
        with anyio.fail_after(60):
            handed = await run_script.run(code, [], "to cancel")
            await setup.fleet.blocked.wait()
            info = await run_script.background.cancel(SESSION, handed.structured["task_id"])
        done = await setup.hub.wait_for(BackgroundDoneEvent)
    assert info.status == "cancelled"
    assert done[0].status == "cancelled"
    assert len(setup.audit.entries) == 1
    assert setup.audit.entries[0].status == "cancelled"
    records = setup.workspace / setup.audit.entries[0].data["records_dir"]
    assert json.loads((records / "run.json").read_text())["status"] == "cancelled"
    assert "never" not in (records / "output.txt").read_text()


async def test_cancelling_an_unknown_background_run_is_a_clear_error(setup: Setup) -> None:
    from sagents.errors import TaskNotFoundError

    async with setup.tool() as run_script:
        with pytest.raises(TaskNotFoundError, match="no background task"):
            await run_script.background.cancel(SESSION, "nope")


async def test_a_run_left_running_by_a_restart_is_marked_aborted_and_reported(
    setup: Setup,
) -> None:
    records = ScriptRecords.create(setup.workspace, "20260101-000000-deadbeef", "print(1)\n")
    records.close()
    async with setup.tool() as run_script:
        assert run_script.interrupted == ("20260101-000000-deadbeef",)
    status = json.loads((records.path / "run.json").read_text())
    assert status["status"] == "aborted"
    done = setup.hub.of(BackgroundDoneEvent)
    assert [(event.handle, event.status) for event in done] == [
        ("20260101-000000-deadbeef", "error")
    ]
    assert "not resumed" in done[0].text


async def test_running_outside_the_context_is_a_clear_error(setup: Setup) -> None:
    run_script = setup.tool()
    with pytest.raises(RuntimeError, match="not running"):
        await run_script.run("print(1)\n")


async def test_a_sandbox_without_a_host_workspace_is_refused(
    runtime: ScriptRuntime, tmp_path: Path
) -> None:
    async with create_sandbox("memory", workspace=str(tmp_path)) as sandbox:
        with pytest.raises(SandboxError, match="host workspace"):
            RunScriptTool(
                tools=ToolManager(),
                session=SessionContext(),
                sandbox=sandbox,
                runtime=runtime,
            )


async def test_closing_the_tool_stops_a_run_of_a_shared_registry_cleanly(setup: Setup) -> None:
    code = "from agent_tools import call\ncall('fleet__block', {})\n"
    async with BackgroundTasks() as shared:
        async with setup.tool(background_after_s=0.0, background=shared) as run_script:
            with anyio.fail_after(60):
                handed = await run_script.run(code, [], "left running")
                await setup.fleet.blocked.wait()
        task_id = handed.structured["task_id"]
        with anyio.fail_after(60):
            while shared.get(SESSION, task_id).status == "running":
                await anyio.lowlevel.checkpoint()  # the task ends right after the run
        info = shared.get(SESSION, task_id)
    assert info.result is not None
    assert info.result.structured["status"] == "cancelled"
    assert [entry.status for entry in setup.audit.entries] == ["cancelled"]


async def test_runs_during_a_database_outage_have_their_row_or_say_so_and_are_refused_once_known(
    setup: Setup, own_postgres: PostgresServer
) -> None:
    """A real PostgreSQL stopped (``pg_ctl stop -m immediate``) under a session, then started:
    no run is answered as a plain ``ok`` without its row; once the store is known to be down
    a run is refused before anything runs; after the restart, runs have their rows again."""
    code = "from agent_tools import call\nprint(call('fleet__get', {'sn': 'A1'})['tool'])\n"
    async with PostgresStore(parse_store_url(own_postgres.url())) as store:
        async with setup.tool(audit=store.audit) as run_script:
            with anyio.fail_after(180):
                before = await run_script.run(code, [], "before")
                await anyio.to_thread.run_sync(own_postgres.stop)
                during = [await run_script.run(code, [], f"during {n}") for n in range(3)]
                await anyio.to_thread.run_sync(own_postgres.start)
                after = await run_script.run(code, [], "after")
        rows = await store.audit.entries()
    ran = [r for r in during if r.structured and "status" in r.structured]
    refused = [r for r in during if r not in ran]
    assert before.structured is not None
    assert before.structured["audit"] == "written"
    for result in ran:
        assert result.structured is not None
        assert result.structured["audit"] == "missing"
        assert "audit not written: " in result.text.splitlines()[0]
    assert refused, [r.text for r in during]  # the last ones at least: the store is known down
    for result in refused:
        assert result.is_error
        assert result.error is not None
        assert result.error.code == "store_unavailable"
    assert len(setup.fleet.calls) == 2 + len(ran)  # a refused run ran nothing
    assert after.structured is not None
    assert after.structured["audit"] == "written"
    assert [row.data["description"] for row in rows] == ["after", "before"]


async def test_a_script_the_preflight_refuses_is_an_error_result_with_its_code(
    setup: Setup,
) -> None:
    code = "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\ncall('fleet__gte', {})\n"
    async with setup.tool(mode="ask") as run_script:
        with anyio.fail_after(60):
            result = await run_script.run(code, ["fleet__set"], "two calls")
    assert result.is_error
    assert result.error is not None
    assert result.error.code == "preflight_failed"
    assert "line 3: no tool 'fleet__gte'" in result.text
    assert result.structured["error_code"] == "preflight_failed"
    assert setup.approver.requests == []  # refused before the approval
    assert setup.fleet.calls == []
    assert [entry.status for entry in setup.audit.entries] == ["rejected"]


@dataclass(frozen=True)
class NamedQuestioner:
    """A questioner that only says whose it is."""

    name: str

    async def ask(self, questionnaire: Questionnaire, *, time_limit: float) -> QuestionnaireAnswer:
        return QuestionnaireAnswer(status="declined", message=self.name)


async def test_a_scripts_calls_carry_the_questioner_of_the_call_that_ran_it(setup: Setup) -> None:
    """What a script's tool asks goes to the user of the run_script call, not to whoever the
    session's tool was opened for (in the gateway: an earlier call's client)."""
    seen: list[object] = []

    @tool(permission="read_only")
    def which_user(context: SessionContext) -> str:
        """Say whom this call would ask."""
        seen.append(context.questioner)
        return "ok"

    setup.manager.register_tool(which_user)
    code = "from agent_tools import call\ncall('which_user', {})\ncall('which_user', {})\n"
    opened_for, caller = NamedQuestioner("earlier call"), NamedQuestioner("this call")
    async with setup.tool(questioner=opened_for) as run_script:
        setup.manager.register_tool(run_script.as_tool())
        with anyio.fail_after(60):
            result = await setup.manager.run_tool(
                "run_script",
                {"code": code, "tools": [], "description": "asks"},
                replace(run_script.session, questioner=caller),
            )
    assert not result.is_error, result.text
    assert seen == [caller, caller]


async def test_cancelling_the_caller_of_a_run_that_is_never_handed_off_stops_it_cleanly(
    setup: Setup,
) -> None:
    code = "from agent_tools import call\ncall('fleet__block', {})\nprint('never')\n"
    async with setup.tool() as run_script:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_script.run, code, [], "cancelled by its caller")
                await setup.fleet.blocked.wait()
                tg.cancel_scope.cancel()
        assert run_script.background.list(SESSION) == []  # nothing was handed off
    assert [entry.status for entry in setup.audit.entries] == ["cancelled"]
    records = setup.workspace / setup.audit.entries[0].data["records_dir"]
    assert json.loads((records / "run.json").read_text())["status"] == "cancelled"
    assert "never" not in (records / "output.txt").read_text()


async def test_a_run_that_cannot_be_handed_off_opens_task_groups_only_in_its_runner(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/architecture.md, "Lifecycles": one task group per run, owned by the runner (the
    # script's calls are served by the dispatcher's); no background registry where no
    # hand-off can happen, no group of its own for the progress throttle.
    code = "from agent_tools import call\nprint(call('fleet__get', {'sn': 'A'})['sn'])\n"
    created: list[str] = []
    original = anyio.create_task_group

    def counting() -> Any:
        import sys

        caller = sys._getframe(1)
        created.append(f"{caller.f_globals.get('__name__')}:{caller.f_code.co_name}")
        return original()

    async with setup.tool() as run_script:
        with anyio.fail_after(60):
            first = await run_script.run(code, [], "opens the session's parts")
            monkeypatch.setattr(anyio, "create_task_group", counting)
            result = await run_script.run(code, [], "counted")
            monkeypatch.setattr(anyio, "create_task_group", original)
    assert not first.is_error, first.text
    assert not result.is_error, result.text
    # the spare sandbox started for the next run is the launcher's, not the run's
    of_the_run = sorted(name for name in created if not name.startswith("sagents.sandbox."))
    assert of_the_run == ["sagents.script._dispatcher:serve", "sagents.script._runner:_supervise"]


async def test_a_run_given_its_own_tools_calls_those_not_the_sessions(setup: Setup) -> None:
    """A run is given what its call may call (a gateway session's offer for that call): its
    script sees and calls those tools, and the tool's own ``tools`` are not reached."""
    async with ToolManager() as offered:

        @tool(permission="read_only")
        def offered_only(text: str) -> str:
            """A tool only this run is given."""
            return f"offered {text}"

        offered.register_tool(offered_only)
        offer = ToolProxy(offered)
        only = "from agent_tools import call\nprint(call('offered_only', {'text': 'x'}))\n"
        fleet = "from agent_tools import call\ncall('fleet__get', {'sn': 'A1'})\n"
        async with setup.tool() as run_script:
            with anyio.fail_after(60):
                result = await run_script.run(only, [], "offered", provider=offer)
                refused = await run_script.run(fleet, [], "not offered", provider=offer)
    assert not result.is_error, result.text
    assert "offered x" in result.text
    assert refused.is_error
    assert "no tool 'fleet__get' is available to this script" in refused.text
    assert setup.fleet.calls == []
