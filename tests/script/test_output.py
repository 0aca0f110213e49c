"""Output capture and the model-facing text."""

from __future__ import annotations

import pytest

from sagents.script._output import OutputCapture, RunSummary, format_model_text, format_summary_line


def test_small_output_is_kept_whole_and_written_through() -> None:
    written: list[bytes] = []
    capture = OutputCapture(write=written.append)
    capture.feed(b"hello \xe4\xb8")
    capture.feed(b"\xad\n")  # a character split across chunks
    capture.finish()
    assert capture.model_output() == "hello 中\n"
    assert b"".join(written) == "hello 中\n".encode()
    assert not capture.truncated


def test_the_cap_cuts_the_chunk_and_reports_it() -> None:
    written: list[bytes] = []
    capture = OutputCapture(write=written.append, max_bytes=10)
    assert capture.feed(b"123456") is False
    assert capture.feed(b"7890abc") is True
    assert b"".join(written) == b"1234567890"
    assert capture.truncated


def test_long_output_keeps_head_and_tail_with_a_marker() -> None:
    capture = OutputCapture(write=lambda _: None, max_chars=100)
    for i in range(100):
        capture.feed(f"{i:03d}\n".encode())
    capture.finish()
    text = capture.model_output()
    assert text.startswith("000\n")
    assert text.endswith("099\n")
    assert "[... 300 characters cut; the full output is in output.txt ...]" in text


def test_the_stderr_tail_is_kept_for_errors() -> None:
    capture = OutputCapture(write=lambda _: None)
    capture.feed(b"out\n")
    capture.feed(b"Traceback...\nValueError: x\n", stream="stderr")
    assert capture.stderr_tail().endswith("ValueError: x\n")


def test_the_summary_line_matches_the_documented_example() -> None:
    summary = RunSummary(
        status="ok", calls=501, failed=0, duration_s=2.4, records_dir=".agent/scripts/abc/"
    )
    assert format_summary_line(summary) == (
        "run_script ok: 501 calls, 0 failed, 2.4 s, records .agent/scripts/abc/"
    )


@pytest.mark.parametrize(
    ("calls", "expected"), [(0, "0 calls"), (1, "1 call,"), (2, "2 calls"), (11, "11 calls")]
)
def test_the_summary_line_says_one_call_in_the_singular(calls: int, expected: str) -> None:
    summary = RunSummary(status="ok", calls=calls, failed=0, duration_s=0.1, records_dir=None)
    assert format_summary_line(summary).startswith(f"run_script ok: {expected}")


def test_the_error_tail_is_added_only_when_the_output_lacks_it() -> None:
    summary = RunSummary(
        status="error", calls=0, failed=0, duration_s=0.1, records_dir=None, exit_code=1
    )
    shown = format_model_text(summary, "out\nValueError: x\n", error="ValueError: x\n")
    assert shown.count("ValueError: x") == 1
    added = format_model_text(summary, "head [... cut ...] tail", error="ValueError: y\n")
    assert added.endswith("[error, last part]\nValueError: y")
    assert added.startswith("run_script error: exit code 1, 0 calls")
