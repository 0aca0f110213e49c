"""The ``scripts`` settings block and the runtime directory."""

from __future__ import annotations

import importlib.util
import stat
from pathlib import Path

import pytest

from sagents.config._models import ScriptsParams
from sagents.core._limits import ScriptLimits
from sagents.errors import ConfigError
from sagents.script._runtime import COMPILED_FILES, RUNTIME_FILES, install_runtime


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
    files = sorted(p.name for p in runtime.directory.iterdir() if p.name != "__pycache__")
    assert files == sorted(RUNTIME_FILES)
    assert stat.S_IMODE(runtime.bootstrap.stat().st_mode) == 0o444
    helper = runtime.directory / "agent_tools.py"
    helper.chmod(0o644)
    helper.write_text("tampered")
    install_runtime(tmp_path)
    assert "def call_many" in helper.read_text()


def test_the_imported_runtime_files_get_checked_bytecode_written_once(tmp_path: Path) -> None:
    runtime = install_runtime(tmp_path)
    for name in COMPILED_FILES:
        source = runtime.directory / name
        cached = Path(importlib.util.cache_from_source(str(source)))
        data = cached.read_bytes()
        assert data[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(data[4:8], "little") == 0b11  # PEP 552: hash-based, checked
        assert data[8:16] == importlib.util.source_hash(source.read_bytes())
        assert stat.S_IMODE(cached.stat().st_mode) == 0o444
        before = cached.stat().st_ino
        install_runtime(tmp_path)
        assert cached.stat().st_ino == before  # unchanged: left alone


def test_bytecode_of_a_changed_helper_is_rewritten(tmp_path: Path) -> None:
    runtime = install_runtime(tmp_path)
    helper = runtime.directory / "agent_tools.py"
    cached = Path(importlib.util.cache_from_source(str(helper)))
    cached.chmod(0o644)
    cached.write_bytes(b"stale")
    install_runtime(tmp_path)
    assert cached.read_bytes()[8:16] == importlib.util.source_hash(helper.read_bytes())
