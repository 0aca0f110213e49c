"""``sagents run-script`` on a terminal (a pseudo-terminal): the approval prompt and the live
progress bar go to the terminal, the model-facing text to stdout."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cli.cli_helpers import SAGENTS, fleet_config, run_on_terminal

SCRIPT = """\
from agent_tools import call, call_many, progress
rows = call_many("fleet__get_device_status", [{"sn": f"SN{i:04d}"} for i in range(20)])
progress(len(rows), 20, "queried")
print(call("fleet__set_device_config", {"sn": "SN0001", "key": "k", "value": "v"}))
"""
PROMPT = b"allow once [o] / deny [d]: "


def _run_on_terminal(tmp_path: Path, answer: bytes) -> tuple[int, str, str]:
    config = fleet_config(tmp_path / "fleet.json")
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "SAGENTS_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "120"}
    argv = [str(SAGENTS), "run-script", str(script), "--config", str(config), "--mode", "ask",
            "--tools", "fleet__set_device_config", "--workspace", str(tmp_path / "ws")]  # fmt: skip
    code, stdout, terminal = run_on_terminal(
        argv, cwd=tmp_path, env=env, prompt=PROMPT, answer=answer
    )
    assert "fleet__set_device_config" in terminal
    return code, stdout, terminal


def test_ask_mode_on_a_terminal_prompts_and_allow_once_runs_the_script(tmp_path: Path) -> None:
    code, text, terminal = _run_on_terminal(tmp_path, b"a\n")
    assert code == 0, text + terminal
    assert text.startswith("run_script ok: 21 calls, 0 failed, ")
    assert "SN0001: k set to 'v'" in text
    assert PROMPT.decode() not in text  # the prompt is on the terminal, not in the result
    assert "21 calls, 0 failed" in terminal  # the live bar's last state
    assert "20/20" in terminal


def test_ask_mode_on_a_terminal_deny_rejects_the_run(tmp_path: Path) -> None:
    code, text, terminal = _run_on_terminal(tmp_path, b"d\n")
    assert code == 1, text + terminal
    assert text.startswith("run_script rejected: ")
    assert "denied" in text
    assert not list((tmp_path / "ws").glob(".agent/scripts/*"))  # nothing ran
