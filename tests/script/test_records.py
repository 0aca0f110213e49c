"""Records folders: safe creation, descriptors that symlinks cannot redirect."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagents.script import _records as records_module
from sagents.script._records import (
    MAX_RECORDED_ARGUMENTS_CHARS,
    TRUNCATED_KEY,
    CallRecord,
    ScriptRecords,
    new_script_id,
    summarize,
)


def test_records_are_created_with_the_script_and_a_running_status(tmp_path: Path) -> None:
    records = ScriptRecords.create(tmp_path, "run1", "print('hi')\n")
    try:
        assert records.relative_dir == ".agent/scripts/run1/"
        assert (records.path / "script.py").read_text() == "print('hi')\n"
        assert json.loads((records.path / "run.json").read_text())["status"] == "running"
        started = json.loads((records.path / "run.json").read_text())["started"]
        records.write_status({"status": "ok"})
        # the run's start time is kept through every write (the console's Runs column)
        assert json.loads((records.path / "run.json").read_text()) == {
            "status": "ok",
            "started": started,
        }
    finally:
        records.close()


def test_a_symlinked_agent_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".agent").symlink_to(elsewhere)
    with pytest.raises(OSError, match=r"Too many levels of symbolic links|Not a directory"):
        ScriptRecords.create(workspace, "run1", "")
    assert list(elsewhere.iterdir()) == []


def test_an_existing_run_folder_is_refused(tmp_path: Path) -> None:
    ScriptRecords.create(tmp_path, "run1", "").close()
    with pytest.raises(FileExistsError):
        ScriptRecords.create(tmp_path, "run1", "")


def test_writes_follow_the_open_descriptors_after_a_swap(tmp_path: Path) -> None:
    records = ScriptRecords.create(tmp_path, "run1", "")
    outside = tmp_path / "outside.txt"
    os.rename(records.path / "output.txt", records.path / "old.txt")
    (records.path / "output.txt").symlink_to(outside)
    records.write_output(b"secret")
    records.write_call(
        CallRecord(
            ts=1.0,
            tool="t",
            arguments={"a": 1},
            duration_s=0.5,
            is_error=False,
            error_code=None,
            summary="ok",
        )
    )
    records.close()
    assert not outside.exists()
    assert (records.path / "old.txt").read_bytes() == b"secret"
    line = json.loads((records.path / "calls.jsonl").read_text())
    assert line["tool"] == "t"
    assert line["arguments"] == {"a": 1}


def test_script_ids_sort_by_time_and_summaries_are_short() -> None:
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{8}", new_script_id())
    assert summarize("a\n  b") == "a b"
    assert len(summarize("x" * 1000)) == 200


def test_runs_left_running_are_marked_aborted_after_a_restart(tmp_path: Path) -> None:
    from sagents.script._records import mark_interrupted_runs

    left = ScriptRecords.create(tmp_path, "left-running", "")
    left.close()
    done = ScriptRecords.create(tmp_path, "finished", "")
    done.write_status({"status": "ok"})
    done.close()
    broken = ScriptRecords.create(tmp_path, "broken", "")
    broken.close()
    (broken.path / "run.json").write_text("{not json")
    assert mark_interrupted_runs(tmp_path) == ["left-running"]
    status = json.loads((left.path / "run.json").read_text())
    assert status["status"] == "aborted"
    finished = json.loads((done.path / "run.json").read_text())
    assert finished["status"] == "ok"
    assert set(finished) == {"status", "started"}
    assert mark_interrupted_runs(tmp_path / "no-such-workspace") == []


def _call(arguments: dict[str, object]) -> CallRecord:
    return CallRecord(
        ts=1.0,
        tool="fleet__get",
        arguments=arguments,
        duration_s=0.1,
        is_error=False,
        error_code=None,
        summary="ok",
    )


def test_long_arguments_are_recorded_cut_with_a_marker_and_short_ones_whole(
    tmp_path: Path,
) -> None:
    records = ScriptRecords.create(tmp_path, "run1", "")
    try:
        records.write_call(_call({"sn": "A1", "note": "é"}))
        records.write_call(_call({"x": "y" * 100_000}))
    finally:
        records.close()
    short, long = [
        json.loads(line) for line in (records.path / "calls.jsonl").read_text().splitlines()
    ]
    assert short == {
        "ts": 1.0,
        "tool": "fleet__get",
        "arguments": {"sn": "A1", "note": "é"},
        "duration_s": 0.1,
        "is_error": False,
        "error_code": None,
        "summary": "ok",
    }
    assert set(long["arguments"]) == {TRUNCATED_KEY, "chars"}
    assert long["arguments"]["chars"] == len(json.dumps({"x": "y" * 100_000}))
    assert long["arguments"][TRUNCATED_KEY].endswith("…")
    assert len(long["arguments"][TRUNCATED_KEY]) == MAX_RECORDED_ARGUMENTS_CHARS + 1


def test_the_calls_log_stops_at_its_cap_with_one_last_line_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records_module, "MAX_CALLS_LOG_BYTES", 10_000)
    records = ScriptRecords.create(tmp_path, "run1", "")
    try:
        for i in range(1000):
            records.write_call(_call({"i": i}))
    finally:
        records.close()
    data = (records.path / "calls.jsonl").read_bytes()
    lines = [json.loads(line) for line in data.splitlines()]
    assert len(data) <= 10_000 + 200
    assert lines[-1]["truncated"] is True
    assert all("truncated" not in line for line in lines[:-1])
    assert [line["arguments"]["i"] for line in lines[:-1]] == list(range(len(lines) - 1))


TEXTS = st.text() | st.sampled_from(["\ud800 lone", 'é\n"\\', "\x00\x1f\u2028"])


@given(
    tool=TEXTS,
    arguments=st.dictionaries(TEXTS, st.none() | st.booleans() | st.integers() | TEXTS, max_size=4),
    is_error=st.booleans(),
    error_code=st.none() | TEXTS,
    summary=TEXTS,
    ts=st.floats(min_value=0, max_value=4e9),
)
def test_a_calls_log_line_is_what_json_dumps_writes_for_the_record(
    tmp_path_factory: pytest.TempPathFactory,
    tool: str,
    arguments: dict[str, object],
    is_error: bool,
    error_code: str | None,
    summary: str,
    ts: float,
) -> None:
    records = ScriptRecords.create(tmp_path_factory.mktemp("w"), "run1", "")
    record = CallRecord(
        ts=ts,
        tool=tool,
        arguments=arguments,
        duration_s=0.25,
        is_error=is_error,
        error_code=error_code,
        summary=summary,
    )
    records.write_call(record)
    records.close()
    fields = {
        "ts": ts,
        "tool": tool,
        "arguments": arguments,
        "duration_s": 0.25,
        "is_error": is_error,
        "error_code": error_code,
        "summary": summary,
    }
    expected = json.dumps(fields, ensure_ascii=False) + "\n"
    assert (records.path / "calls.jsonl").read_bytes() == expected.encode(
        "utf-8", "backslashreplace"
    )
