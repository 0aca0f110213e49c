"""run_script end to end with a real ``python`` subprocess (no sandbox) and a fake call_tool."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.errors import NotAllowedError
from sagents.script._values import ScriptProgressUpdate, ScriptRequest, ScriptRunResult
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest, Decision, DenyAllApprover
from tests.script.conftest import RUN_TIME_ONLY, FakeTools, RunnerFactory, read_calls

pytestmark = pytest.mark.anyio


async def _run(make_runner: RunnerFactory, code: str, **kwargs: object) -> ScriptRunResult:
    tools = kwargs.pop("tools", ())
    runner = make_runner(**kwargs)
    with anyio.fail_after(60):
        return await runner.run(
            ScriptRequest(code=textwrap.dedent(code), tools=tools, description="test")  # type: ignore[arg-type]
        )


async def test_call_returns_structured_results_and_the_summary_line_counts_calls(
    make_runner: RunnerFactory, workspace: Path
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call
        print(call("fleet__get", {"sn": "A1"})["sn"])
        print(call("fleet__text", {"sn": "B2"}))
        """,
    )
    assert result.status == "ok", result.output
    assert result.exit_code == 0
    first, *rest = result.output.splitlines()
    assert first.startswith("run_script ok: 2 calls, 0 failed, ")
    assert first.endswith(f"records .agent/scripts/{result.script_id}/")
    assert rest == ["A1", "plain B2"]
    assert result.calls_per_tool == {"fleet__get": 1, "fleet__text": 1}
    assert (workspace / (result.records_dir or "") / "output.txt").read_text() == "A1\nplain B2\n"


async def test_call_many_keeps_input_order_and_peak_concurrency_stays_at_four(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call_many, progress
        rows = call_many("fleet__get", [{"sn": f"S{i}"} for i in range(300)])
        assert [r["sn"] for r in rows] == [f"S{i}" for i in range(300)]
        progress(300, 300, "done")
        print(len(rows))
        """,
    )
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1] == "300"
    assert result.calls == 300
    assert tools.peak == 4


async def test_the_2001st_call_is_refused(make_runner: RunnerFactory, workspace: Path) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call, call_many, ToolError
        call_many("fleet__get", [{"sn": str(i)} for i in range(2000)])
        try:
            call("fleet__get", {"sn": "one too many"})
        except ToolError as error:
            print("refused", error.code)
        """,
    )
    assert result.status == "ok", result.output
    assert "refused limit_exceeded" in result.output
    assert (result.calls, result.failed) == (2001, 1)
    lines = read_calls(workspace, result.records_dir or "")
    assert len(lines) == 2001
    assert lines[-1]["error_code"] == "limit_exceeded"


async def test_a_lower_call_limit_from_settings_applies(make_runner: RunnerFactory) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call_many, ToolError
        try:
            call_many("fleet__get", [{"sn": str(i)} for i in range(5)])
        except ToolError as error:
            print("stopped", error.code)
        """,
        limits=ScriptLimits(max_calls=3, timeout_s=60),
    )
    assert "stopped limit_exceeded" in result.output
    assert result.failed == 2


async def test_ten_threads_calling_at_once_each_get_their_own_reply(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        import threading
        from agent_tools import call
        results = {}
        def work(n):
            for k in range(20):
                results[(n, k)] = call("fleet__get", {"sn": f"{n}-{k}"})["sn"]
        threads = [threading.Thread(target=work, args=(n,)) for n in range(10)]
        for t in threads: t.start()
        for t in threads: t.join()
        bad = [key for key, sn in results.items() if sn != f"{key[0]}-{key[1]}"]
        print(len(results), "mismatched", len(bad))
        """,
    )
    assert result.status == "ok", result.output
    assert "200 mismatched 0" in result.output


async def test_a_script_that_never_imports_the_helper_runs(make_runner: RunnerFactory) -> None:
    result = await _run(make_runner, "print('hello')\n")
    assert result.status == "ok"
    assert result.output.splitlines()[1:] == ["hello"]
    assert result.calls == 0


async def test_sys_exit_3_is_an_error_with_exit_code_3(make_runner: RunnerFactory) -> None:
    result = await _run(make_runner, "import sys\nprint('bye')\nsys.exit(3)\n")
    assert (result.status, result.exit_code) == ("error", 3)
    assert result.output.startswith("run_script error: exit code 3, 0 calls")


async def test_exit_and_quit_end_a_script_as_they_end_python_script_py(
    make_runner: RunnerFactory,
) -> None:
    """The script runs without ``site`` (``-S``), which is where ``exit`` and ``quit`` come
    from; a model's script calls them as it would in ``python script.py``."""
    result = await _run(make_runner, "print('bye')\nexit(3)\nprint('not reached')\n")
    assert (result.status, result.exit_code) == ("error", 3)
    assert result.output.splitlines()[1:] == ["bye"]
    result = await _run(make_runner, "print('done')\nquit()\n")
    assert result.status == "ok", result.output


async def test_an_uncaught_exception_shows_the_end_of_the_traceback(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        def inner():
            raise ValueError("the device list is empty")
        inner()
        """,
    )
    assert (result.status, result.exit_code) == ("error", 1)
    assert "ValueError: the device list is empty" in result.output
    assert "Traceback" in result.output
    assert "bootstrap.py" not in result.output
    assert "runpy" not in result.output


async def test_endless_output_ends_the_run_at_the_output_cap(
    make_runner: RunnerFactory, workspace: Path
) -> None:
    result = await _run(
        make_runner,
        "while True:\n    print('x' * 1000)\n",
        limits=ScriptLimits(max_output_bytes=200_000, timeout_s=60),
    )
    assert result.status == "output_limit"
    assert result.truncated
    assert "scripts.maxOutputBytes" in result.output
    assert (workspace / (result.records_dir or "") / "output.txt").stat().st_size == 200_000


async def test_output_over_20000_chars_is_cut_to_head_and_tail_with_the_full_text_saved(
    make_runner: RunnerFactory, workspace: Path
) -> None:
    result = await _run(
        make_runner,
        "for i in range(5000):\n    print(f'line {i:05d}')\n",
    )
    assert result.status == "ok"
    assert result.truncated
    assert "line 00000" in result.output
    assert "line 04999" in result.output
    assert "line 02500" not in result.output
    assert "characters cut; the full output is in output.txt" in result.output
    assert len(result.output) < 21_000
    full = (workspace / (result.records_dir or "") / "output.txt").read_text()
    assert full.count("\n") == 5000


async def test_a_timeout_kills_the_tree_including_a_new_session_grandchild(
    make_runner: RunnerFactory, tmp_path: Path
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    result = await _run(
        make_runner,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True)
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(600)
        """,
        limits=ScriptLimits(timeout_s=3.0),
    )
    assert result.status == "timeout"
    assert "scripts.timeoutSec" in result.output
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        _wait_gone(pid)


def _wait_gone(pid: int) -> None:
    """Raise ProcessLookupError once ``pid`` is gone (a killed, reaped orphan)."""
    for _ in range(1000):
        try:
            with open(f"/proc/{pid}/stat") as file:
                if file.read().split(") ")[1].startswith("Z"):
                    raise ProcessLookupError(pid)
        except FileNotFoundError:
            raise ProcessLookupError(pid) from None
        os.sched_yield()
    os.kill(pid, 0)


async def test_approval_denied_rejects_the_run_before_it_starts(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path
) -> None:
    result = await _run(
        make_runner,
        "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\n",
        tools=["fleet__set"],
        mode="ask",
        approver=DenyAllApprover(),
    )
    assert result.status == "rejected"
    assert "denied" in result.output
    assert "fleet__set" in result.output
    assert tools.calls == []
    assert result.records_dir is None
    assert not (workspace / ".agent").exists()


class _Recording:
    """Answers ``answer`` (or raises ``NotAllowedError``) and keeps the requests."""

    def __init__(self, answer: ApprovalAnswer | None) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        if self.answer is None:
            raise NotAllowedError("the approval channel is closed")
        return self.answer


async def test_the_one_approval_before_a_run_is_a_script_request_of_the_one_protocol(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    approver = _Recording("allow_once")
    code = "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\n"
    result = await _run(make_runner, code, tools=["fleet__set"], mode="ask", approver=approver)
    assert result.status == "ok", result.output
    (request,) = approver.requests
    assert request.kind == "script"
    assert request.tools == ("fleet__set",)
    assert request.offered == ("allow_once", "deny")
    assert request.script == code


async def test_an_answer_the_script_request_did_not_offer_denies_the_run(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    code = "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\n"
    approver = _Recording("allow_session")
    result = await _run(make_runner, code, tools=["fleet__set"], mode="ask", approver=approver)
    assert result.status == "rejected"
    assert tools.calls == []


async def test_an_approver_that_refuses_with_not_allowed_rejects_the_run_with_its_reason(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    code = "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\n"
    result = await _run(
        make_runner, code, tools=["fleet__set"], mode="ask", approver=_Recording(None)
    )
    assert result.status == "rejected"
    assert "the approval channel is closed" in result.output
    assert tools.calls == []


async def test_a_listed_write_tool_runs_after_approval_in_ask_mode(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    result = await _run(
        make_runner,
        "from agent_tools import call\nprint(call('fleet__set', {'sn': 'A'})['tool'])\n",
        tools=["fleet__set"],
        mode="ask",
    )
    assert result.status == "ok", result.output
    assert tools.calls == [("fleet__set", {"sn": "A"})]


@pytest.mark.parametrize(
    ("tool", "what"), [("fleet__reboot", "destructive"), ("fleet__long", "long-task-only")]
)
async def test_a_destructive_or_long_task_tool_named_in_tools_rejects_the_run(
    make_runner: RunnerFactory, tools: FakeTools, tool: str, what: str
) -> None:
    result = await _run(make_runner, "print('never')\n", tools=[tool])
    assert result.status == "rejected"
    assert f"tool {tool!r} is {what}" in result.output
    assert f"call {tool!r} directly" in result.output
    assert "never" not in result.output.split("\n", 1)[1]
    assert tools.calls == []


@pytest.mark.parametrize(
    ("tool", "code"),
    [
        ("fleet__reboot", "not_allowed"),
        ("fleet__long", "not_allowed"),
        ("fleet__set", "not_allowed"),
        ("fleet__off", "unknown_tool"),
        ("shell", "unknown_tool"),
        ("nope", "unknown_tool"),
    ],
)
async def test_calls_to_tools_the_script_may_not_call_raise_tool_error(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path, tool: str, code: str
) -> None:
    result = await _run(
        make_runner,
        f"""
        from agent_tools import call, ToolError
        try:
            call({tool!r}, {{"sn": "A"}})
        except ToolError as error:
            print("refused", error.tool, error.code, error.message)
        """,
        limits=RUN_TIME_ONLY,
    )
    assert result.status == "ok", result.output
    assert f"refused {tool} {code}" in result.output
    assert tools.calls == []
    assert (result.calls, result.failed) == (1, 1)
    assert read_calls(workspace, result.records_dir or "")[0]["error_code"] == code


async def test_an_unlisted_write_tool_is_refused_with_a_hint_to_list_it(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call, ToolError
        try:
            call("fleet__set", {"sn": "A"})
        except ToolError as error:
            print(error.message)
        """,
    )
    assert "was not listed in run_script's 'tools'" in result.output


async def test_tool_errors_raise_in_call_and_come_back_in_call_raw_and_call_many(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        from agent_tools import call, call_raw, call_many, ToolError
        try:
            call("fleet__fail", {"sn": "A"})
        except ToolError as error:
            print("call:", error.code, error.message)
        raw = call_raw("fleet__fail", {"sn": "B"})
        print("raw:", raw["is_error"], raw["text"])
        rows = call_many("fleet__fail", [{"sn": "C"}, {"sn": "D"}], return_errors=True)
        print("many:", [type(r).__name__ for r in rows])
        try:
            call_many("fleet__fail", [{"sn": str(i)} for i in range(120)])
        except ToolError as error:
            print("first:", error.message)
        """,
    )
    lines = result.output.splitlines()[1:]
    assert lines[0] == "call: tool_error device A is offline"
    assert lines[1] == "raw: True device B is offline"
    assert lines[2] == "many: ['ToolError', 'ToolError']"
    assert lines[3] == "first: device 0 is offline"
    assert result.calls < 3 + 120  # call_many stopped sending after the first failure


async def test_tools_and_describe_list_only_callable_tools(make_runner: RunnerFactory) -> None:
    result = await _run(
        make_runner,
        """
        import json
        from agent_tools import tools, describe, ToolError
        print(json.dumps(sorted(t["name"] for t in tools())))
        print(json.dumps(describe("fleet__get")["input_schema"]))
        try:
            describe("fleet__reboot")
        except ToolError as error:
            print(error.code)
        """,
        tools=["fleet__set"],
    )
    lines = result.output.splitlines()[1:]
    assert json.loads(lines[0]) == ["fleet__fail", "fleet__get", "fleet__set", "fleet__text"]
    assert json.loads(lines[1])["properties"] == {"sn": {"type": "string"}}
    assert lines[2] == "not_allowed"


async def test_a_workspace_agent_tools_py_does_not_shadow_the_helper(
    make_runner: RunnerFactory, workspace: Path
) -> None:
    (workspace / "agent_tools.py").write_text("def call(*a, **k):\n    return 'SHADOW'\n")
    (workspace / "helper_mod.py").write_text("VALUE = 42\n")
    result = await _run(
        make_runner,
        """
        import agent_tools, helper_mod
        print(agent_tools.call("fleet__get", {"sn": "A"}), helper_mod.VALUE)
        """,
    )
    assert result.status == "ok", result.output
    assert "SHADOW" not in result.output
    assert "{'sn': 'A', 'tool': 'fleet__get'} 42" in result.output


async def test_the_script_sees_exactly_fds_0_to_4_and_none_of_the_host_environment(
    make_runner: RunnerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_API_KEY", "sk-123")
    result = await _run(
        make_runner,
        """
        import os
        fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
        print(fds[:5], len(fds), "SECRET_API_KEY" in os.environ, os.getcwd() == os.environ["HOME"])
        """,
    )
    # listdir opens one more descriptor of its own while it reads the directory
    assert "[0, 1, 2, 3, 4] 6 False True" in result.output


async def test_records_are_complete_after_a_kill(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path
) -> None:
    tools.block = anyio.Event()
    runner = make_runner()
    async with runner:
        handle = await runner.start(
            ScriptRequest(
                code=textwrap.dedent(
                    """
                    from agent_tools import call, call_many
                    for i in range(5):
                        call("fleet__text", {"sn": str(i)})
                    print("five done", flush=True)
                    call_many("fleet__get", [{"sn": str(i)} for i in range(10)])
                    """
                )
            )
        )
        with anyio.fail_after(30):
            while len(tools.calls) < 9:
                await tools.started.wait()
                tools.started = anyio.Event()
            handle.cancel()
            result = await handle.wait()
    assert result.status == "cancelled"
    assert tools.cancelled == 4
    lines = read_calls(workspace, result.records_dir or "")
    assert [line["tool"] for line in lines].count("fleet__text") == 5
    assert sum(1 for line in lines if line["error_code"] == "cancelled") == 4
    assert "five done" in (workspace / (result.records_dir or "") / "output.txt").read_text()
    status = json.loads((workspace / (result.records_dir or "") / "run.json").read_text())
    assert status["status"] == "cancelled"


async def test_a_symlink_swapped_into_the_records_does_not_redirect_the_host(
    make_runner: RunnerFactory, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = await _run(
        make_runner,
        f"""
        import os
        from agent_tools import call
        rec = os.path.join(".agent", "scripts", os.environ["SAGENTS_SCRIPT_ID"])
        os.rename(os.path.join(rec, "output.txt"), os.path.join(rec, "moved-output.txt"))
        os.symlink({str(outside / "output.txt")!r}, os.path.join(rec, "output.txt"))
        os.rename(rec, rec + "-moved")
        os.symlink({str(outside)!r}, rec)
        print("SECRET after swap", flush=True)
        call("fleet__get", {{"sn": "after"}})
        """,
    )
    assert result.status == "ok", result.output
    assert list(outside.iterdir()) == []
    moved = workspace / f"{result.records_dir.rstrip('/')}-moved"  # type: ignore[union-attr]
    assert "SECRET after swap" in (moved / "moved-output.txt").read_text()
    assert "after" in (moved / "calls.jsonl").read_text()


async def test_progress_updates_carry_calls_and_the_scripts_own_progress(
    make_runner: RunnerFactory,
) -> None:
    updates: list[ScriptProgressUpdate] = []
    result = await _run(
        make_runner,
        """
        from agent_tools import call, progress
        call("fleet__get", {"sn": "A"})
        progress(1, 2, "half")
        """,
        progress=updates,
    )
    assert result.status == "ok"
    assert any(u.done == 1 and u.total == 2 and u.message == "half" for u in updates)
    assert updates[-1].status == "ok"
    assert updates[-1].calls == 1


async def test_the_helper_outside_run_script_raises_a_clear_error(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        import os, subprocess, sys
        env = dict(os.environ)
        env.pop("SAGENTS_SCRIPT_FDS")
        code = "import sys; sys.path[:0] = sys.argv[1:]; import agent_tools; agent_tools.call('x')"
        runtime = os.path.dirname(sys.modules["agent_tools"].__file__)
        done = subprocess.run([sys.executable, "-I", "-S", "-c", code, runtime], env=env,
                              capture_output=True, text=True)
        print(done.stderr.strip().splitlines()[-1])
        """,
    )
    assert "agent_tools works only in a script started by run_script" in result.output


async def test_a_launch_failure_is_a_sandbox_error(
    make_runner: RunnerFactory,
) -> None:
    from sagents.script._launcher import PlainLauncher

    result = await _run(make_runner, "print(1)\n", launcher=PlainLauncher(python="/nonexistent/py"))
    assert result.status == "sandbox_error"
    assert "the sandbox could not start" in result.output


async def test_a_script_sending_garbage_and_exiting_mid_call_leaves_the_host_intact(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    tools.block = anyio.Event()
    result = await _run(
        make_runner,
        """
        import os
        os.write(3, b"\\xff\\xfe garbage\\n" + b'{"id": 1, "op": "call", "args": {"x": NaN}}\\n')
        os.write(3, b"y" * 5_000_000 + b"\\n" + b'{"id": 1, "op": "teleport"}\\n')
        os.write(3, b'{"id": 2, "op": "call", "tool": "fleet__get", "args": {}}\\n')
        os.write(3, b'{"id": 3, "op": "tools"}\\n')
        replies = os.fdopen(4, "rb")
        while b'"id":3' not in replies.readline():
            pass
        print("exiting mid-call", flush=True)
        os._exit(0)
        """,
    )
    assert result.status == "ok", result.output
    assert "exiting mid-call" in result.output
    assert result.calls == 1
    assert tools.block is not None
    assert not tools.block.is_set()


async def test_a_script_that_closes_its_descriptors_gets_disconnected_errors(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(
        make_runner,
        """
        import os
        from agent_tools import call, ToolError
        call("fleet__get", {})
        os.close(3)
        try:
            call("fleet__get", {})
        except ToolError as error:
            print("after close:", error.code)
        """,
    )
    assert result.status == "ok", result.output
    assert "after close: disconnected" in result.output


async def test_each_run_writes_exactly_one_audit_entry(
    make_runner: RunnerFactory, tmp_path: Path
) -> None:
    from sagents.audit import SqliteAuditStore

    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    code = "from agent_tools import call_many\ncall_many('fleet__get', [{}] * 30)\n"
    result = await _run(make_runner, code, audit=store, session_id="sess")
    rejected = await _run(make_runner, "print(1)\n", audit=store, tools=["fleet__reboot"])
    entries = await store.entries()
    assert [e.status for e in entries] == ["rejected", "ok"]
    entry = entries[1]
    assert (entry.kind, entry.tool, entry.session_id) == ("gateway_call", "run_script", "sess")
    assert entry.data["calls"] == 30
    assert entry.data["calls_per_tool"] == {"fleet__get": 30}
    assert entry.data["script"] == code
    assert entry.data["description"] == "test"
    assert entry.data["exit_code"] == 0
    assert entry.data["records_dir"] == result.records_dir
    assert rejected.records_dir is None


async def test_a_script_killed_by_a_signal_we_did_not_send_is_killed(
    make_runner: RunnerFactory,
) -> None:
    result = await _run(make_runner, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (result.status, result.exit_code) == ("killed", -9)


async def test_a_started_run_hands_back_a_handle_to_await_later(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    tools.block = anyio.Event()
    runner = make_runner()
    async with runner:
        handle = await runner.start(
            ScriptRequest(
                code="from agent_tools import call\nprint(call('fleet__get', {})['tool'])\n"
            )
        )
        with anyio.fail_after(30):
            await tools.started.wait()
            assert not handle.done
            tools.block.set()
            result = await handle.wait()
    assert handle.done
    assert result.status == "ok"
    assert result.script_id == handle.script_id
    assert result.output.endswith("fleet__get")


async def test_start_outside_the_runner_context_is_refused(make_runner: RunnerFactory) -> None:
    with pytest.raises(RuntimeError, match="async with"):
        await make_runner().start(ScriptRequest(code="pass"))


async def test_the_json_shape_has_every_documented_field(make_runner: RunnerFactory) -> None:
    result = await _run(make_runner, "print('x')\n")
    data = result.to_dict()
    assert set(data) >= {
        "status",
        "exit_code",
        "calls",
        "failed",
        "duration_s",
        "records_dir",
        "output",
        "truncated",
    }
    assert json.loads(json.dumps(data)) == data


async def test_cancelling_while_approval_is_pending_cancels_the_run(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:

    asked = anyio.Event()

    class SlowApprover:
        async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
            asked.set()
            await anyio.sleep_forever()
            return "allow_once"

    runner = make_runner(mode="ask", approver=SlowApprover())
    async with runner:
        handle = await runner.start(ScriptRequest(code="print(1)", tools=["fleet__set"]))
        with anyio.fail_after(30):
            await asked.wait()
            handle.cancel()
            result = await handle.wait()
    assert result.status == "cancelled"
    assert "waiting for approval" in result.output
    assert result.records_dir is None
    assert tools.calls == []


async def test_huge_names_and_arguments_make_the_host_write_and_hold_only_a_bounded_amount(
    make_runner: RunnerFactory, tmp_path: Path, workspace: Path
) -> None:
    from sagents.audit import SqliteAuditStore

    store = SqliteAuditStore(path=tmp_path / "audit.sqlite3")
    # 40 calls with 1 MiB names, 40 with 1 MiB arguments, 40 with distinct made-up names:
    # about 80 MiB sent; the host must write and keep a small, fixed amount per call.
    code = """
        import agent_tools
        big = "n" * 2**20
        for i in range(40):
            sends = ((big + str(i), {}), ("fleet__get", {"x": big}), (f"made_up_{i}", {}))
            for tool, args in sends:
                try:
                    agent_tools.call(tool, args)
                except agent_tools.ToolError:
                    pass
        print("sent")
        """
    result = await _run(make_runner, code, audit=store)
    assert result.status == "ok", result.output
    records = workspace / str(result.records_dir)
    calls_log = (records / "calls.jsonl").read_bytes()
    assert len(calls_log) < 80 * 8 * 1024  # 80 recorded calls, each line a few KiB at most
    lines = [json.loads(line) for line in calls_log.splitlines()]
    assert len(lines) == 80  # the overlong names were refused by the protocol, not recorded
    assert all(len(line["tool"]) <= 128 for line in lines)
    assert sum("_truncated" in line["arguments"] for line in lines) == 40
    assert result.calls_per_tool == {"fleet__get": 40, "<other>": 40}
    assert len((records / "run.json").read_bytes()) < 8 * 1024
    assert len(json.dumps(result.to_dict())) < 8 * 1024  # the --json object
    (entry,) = await store.entries()
    assert len(json.dumps(entry.data)) < len(code) + 8 * 1024


async def test_the_script_runs_as_main_like_python_script_py_would(
    make_runner: RunnerFactory,
) -> None:
    code = """
        import pickle, sys

        class Point:
            pass

        def f(x: int) -> None:
            pass

        if __name__ == "__main__":
            print(sys.modules["__main__"].Point is Point, type(pickle.loads(pickle.dumps(Point()))))
            print(f.__annotations__["x"] is int)  # no __future__ of the bootstrap leaks in
            print(__file__.endswith("script.py"), sys.argv[0] == __file__)
        """
    result = await _run(make_runner, code)
    assert result.status == "ok", result.output
    assert result.output.splitlines()[1:] == [
        "True <class '__main__.Point'>",
        "True",
        "True True",
    ]


async def _run_decided(
    make_runner: RunnerFactory, approver: _Recording, decision: Decision
) -> ScriptRunResult:
    """A run listing ``fleet__set`` whose request carries ``decision``."""
    runner = make_runner(mode="ask", approver=approver)
    code = "from agent_tools import call\ncall('fleet__set', {'sn': 'A'})\n"
    request = ScriptRequest(code=code, tools=("fleet__set",), decision=decision)
    with anyio.fail_after(60):
        return await runner.run(request)


async def test_a_run_that_carries_its_callers_decision_is_not_asked_again(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    approver = _Recording("deny")
    decision = Decision(kind="approved_once", tools=frozenset({"fleet__set"}))
    result = await _run_decided(make_runner, approver, decision)
    assert result.status == "ok", result.output
    assert approver.requests == []
    assert [name for name, _ in tools.calls] == ["fleet__set"]


async def test_a_denied_decision_rejects_the_run_with_its_reason_and_nothing_runs(
    make_runner: RunnerFactory, tools: FakeTools
) -> None:
    approver = _Recording("allow_once")
    decision = Decision(kind="denied", tools=frozenset({"fleet__set"}), reason="not today")
    result = await _run_decided(make_runner, approver, decision)
    assert result.status == "rejected"
    assert "not today" in result.output
    assert approver.requests == []
    assert tools.calls == []
