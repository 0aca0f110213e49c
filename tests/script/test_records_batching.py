"""calls.jsonl written in batches: every call recorded, complete at the end of every kind of
run, durable once the run is over."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import anyio
import pytest

from sagents.core._limits import ScriptLimits
from sagents.script._records import CALLS_BATCH_LINES, CallRecord, ScriptRecords
from sagents.script._values import ScriptRequest, ScriptRunResult
from tests.script.conftest import FakeTools, RunnerFactory, read_calls

pytestmark = pytest.mark.anyio

CALLS = 300
MAKE_CALLS = f"""
from agent_tools import call_many
call_many("fleet__get", [{{"sn": str(i)}} for i in range({CALLS})])
print("calls done", flush=True)
"""


def _call(i: int) -> CallRecord:
    return CallRecord(
        ts=1.0,
        tool="fleet__get",
        arguments={"i": i},
        duration_s=0.1,
        is_error=False,
        error_code=None,
        summary="ok",
    )


def test_call_lines_are_held_and_written_in_one_batch(tmp_path: Path) -> None:
    records = ScriptRecords.create(tmp_path, "run1", "")
    calls_log = records.path / "calls.jsonl"
    try:
        for i in range(10):
            records.write_call(_call(i))
        assert calls_log.read_bytes() == b""  # held
        records.flush()
        assert len(calls_log.read_bytes().splitlines()) == 10
        for i in range(10, 10 + CALLS_BATCH_LINES + 5):
            records.write_call(_call(i))
        # a full batch was written on its own; the 5 after it wait for the next flush
        assert len(calls_log.read_bytes().splitlines()) == 10 + CALLS_BATCH_LINES
    finally:
        records.close()
    lines = [json.loads(line) for line in calls_log.read_bytes().splitlines()]
    assert [line["arguments"]["i"] for line in lines] == list(range(15 + CALLS_BATCH_LINES))


def test_sync_and_close_writes_what_is_held_and_syncs_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    records = ScriptRecords.create(tmp_path, "run1", "print(1)\n")
    records.write_call(_call(0))
    records.write_output(b"out")
    open_fds = set(records._fds.values())
    records.sync_and_close()
    records.sync_and_close()  # idempotent
    assert set(synced) == open_fds
    assert len(open_fds) == 5  # the folder, script.py, calls.jsonl, output.txt, run.json
    assert len((records.path / "calls.jsonl").read_bytes().splitlines()) == 1


async def _run(runner_factory: RunnerFactory, code: str, **kwargs: object) -> ScriptRunResult:
    runner = runner_factory(**kwargs)
    with anyio.fail_after(120):
        return await runner.run(ScriptRequest(code=textwrap.dedent(code)))


def _assert_one_line_per_call(workspace: Path, result: ScriptRunResult, tools: FakeTools) -> None:
    lines = read_calls(workspace, result.records_dir or "")
    assert len(lines) == len(tools.calls) == result.calls
    assert sorted(line["arguments"]["sn"] for line in lines) == sorted(
        arguments["sn"] for _, arguments in tools.calls
    )


async def test_records_equal_calls_for_500_concurrent_calls(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path
) -> None:
    code = """
    from agent_tools import call_many
    call_many("fleet__get", [{"sn": str(i)} for i in range(500)])
    """
    result = await _run(make_runner, code, limits=ScriptLimits(timeout_s=60.0, max_concurrency=4))
    assert result.status == "ok", result.output
    assert result.calls == 500
    _assert_one_line_per_call(workspace, result, tools)
    assert tools.peak == 4


async def test_records_are_complete_after_the_script_crashes(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path
) -> None:
    result = await _run(make_runner, MAKE_CALLS + "import os\nos.kill(os.getpid(), 9)\n")
    assert result.status == "killed"
    _assert_one_line_per_call(workspace, result, tools)


async def test_records_are_complete_after_a_timeout(
    make_runner: RunnerFactory, tools: FakeTools, workspace: Path
) -> None:
    code = MAKE_CALLS + "import time\nwhile True:\n    time.sleep(1)\n"
    result = await _run(make_runner, code, limits=ScriptLimits(timeout_s=3.0))
    assert result.status == "timeout"
    assert result.calls == CALLS
    _assert_one_line_per_call(workspace, result, tools)


async def test_records_are_complete_after_a_cancel_and_durable_once_it_is_over(
    make_runner: RunnerFactory,
    tools: FakeTools,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    printed = anyio.Event()

    def on_output(stream: str, chunk: bytes) -> None:
        if b"calls done" in chunk:
            printed.set()

    runner = make_runner(on_output=on_output)
    code = MAKE_CALLS + "import time\nwhile True:\n    time.sleep(1)\n"
    async with runner:
        handle = await runner.start(ScriptRequest(code=code))
        with anyio.fail_after(60):
            await printed.wait()  # every call answered: the script now sleeps
            handle.cancel()
            result = await handle.wait()
    assert result.status == "cancelled"
    _assert_one_line_per_call(workspace, result, tools)
    assert len(synced) == 5  # leaving the runner waited for the records to be durable


async def test_a_full_disk_under_calls_jsonl_gives_a_result_that_says_the_records_are_incomplete(
    make_runner: RunnerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    create = ScriptRecords.create

    def on_a_full_disk(workspace: Path, script_id: str, code: str) -> ScriptRecords:
        records = create(workspace, script_id, code)
        full = os.open("/dev/full", os.O_WRONLY | os.O_CLOEXEC)  # every write: ENOSPC
        try:
            os.dup2(full, records._fds["calls"])
        finally:
            os.close(full)
        return records

    monkeypatch.setattr(ScriptRecords, "create", on_a_full_disk)
    result = await _run(make_runner, MAKE_CALLS)
    assert result.status == "ok"  # the run is not lost: its result says what is missing
    assert result.calls == CALLS
    assert "calls done" in result.output
    assert "the records are incomplete (calls.jsonl: [Errno 28] No space left on device)" in (
        result.output
    )


def test_a_script_that_cannot_be_written_whole_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(OSError, match="No space left"):
        ScriptRecords.create(tmp_path, "run1", "print('cut short')\n")
