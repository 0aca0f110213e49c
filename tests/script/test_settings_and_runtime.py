"""The ``scripts`` settings block and the runtime directory."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sagents.errors import ConfigError
from sagents.script.runtime import RUNTIME_FILES, install_runtime
from sagents.script.settings import ScriptLimits, ScriptsParams


def test_scripts_settings_map_to_limits() -> None:
    params = ScriptsParams.parse(
        {"maxCalls": 10, "maxConcurrency": 2, "timeoutSec": 5, "maxOutputBytes": 1000}
    )
    assert params.to_limits() == ScriptLimits(
        max_calls=10, max_concurrency=2, timeout_s=5, max_output_bytes=1000
    )
    assert ScriptsParams.parse({}).to_limits() == ScriptLimits()


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"maxConcurrency": 0}, "scripts.maxConcurrency"),
        ({"maxCall": 1}, "scripts.maxCall"),
        ({"timeoutSec": "soon"}, "scripts.timeoutSec"),
    ],
)
def test_bad_scripts_settings_name_the_key_and_the_file(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ScriptsParams.parse(raw, file="servers.json")
    assert caught.value.details == {"file": "servers.json", "key": key}


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        ScriptLimits(timeout_s=0)


def test_the_runtime_is_written_read_only_and_refreshed_when_changed(tmp_path: Path) -> None:
    runtime = install_runtime(tmp_path)
    assert sorted(p.name for p in runtime.directory.iterdir()) == sorted(RUNTIME_FILES)
    assert stat.S_IMODE(runtime.bootstrap.stat().st_mode) == 0o444
    helper = runtime.directory / "agent_tools.py"
    helper.chmod(0o644)
    helper.write_text("tampered")
    install_runtime(tmp_path)
    assert "def call_many" in helper.read_text()
