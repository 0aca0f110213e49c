"""``sagents demo``, run as a subprocess with no configuration at all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sagents.demo import FLEET_SCRIPT, demo_config
from tests.cli.cli_helpers import REPO, run_cli

SUMMARY = re.compile(r"^run_script ok: (\d+) calls, (\d+) failed, [\d.]+ s, records (\S+)$")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def test_the_demo_prints_the_result_the_records_and_the_audit_entry(
    tmp_path: Path, data_dir: Path
) -> None:
    ws = tmp_path / "ws"
    ran = run_cli("demo", "--workspace", str(ws), cwd=tmp_path, data_dir=data_dir)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    match = SUMMARY.match(lines[0])
    assert match, lines[0]
    calls, failed = int(match.group(1)), int(match.group(2))
    assert calls >= 500
    assert failed == 0
    assert lines[1].startswith("500 devices: ")
    records = next(line for line in lines if line.startswith("records: "))
    records_path = Path(records.removeprefix("records: "))
    assert records_path.parent == ws / ".agent" / "scripts"
    assert len((records_path / "calls.jsonl").read_text().splitlines()) == calls
    audit = json.loads(next(line for line in lines if line.startswith("audit: "))[7:])
    assert (audit["tool"], audit["status"], audit["calls"], audit["failed"]) == (
        "run_script", "ok", calls, 0,
    )  # fmt: skip
    assert audit["calls_per_tool"]["fleet__get_device_status"] == 500


def test_the_demo_json_is_one_object_with_the_audit_entry(tmp_path: Path, data_dir: Path) -> None:
    ran = run_cli("demo", "--json", cwd=tmp_path, data_dir=data_dir)
    out = ran.json()
    assert (out["status"], out["failed"], ran.returncode) == ("ok", 0, 0)
    assert out["calls"] >= 500
    assert Path(out["records_path"], "script.py").read_text() == FLEET_SCRIPT.read_text()
    assert out["audit"]["script_id"] == out["script_id"]


def test_the_demo_needs_no_configuration_file() -> None:
    config = demo_config()
    assert [server.name for server in config.servers] == ["fleet"]
    assert config.source is None


def test_the_fleet_example_uses_the_bundled_script_and_server() -> None:
    fleet = REPO / "examples" / "fleet"
    assert (fleet / "fleet_report.py").resolve() == FLEET_SCRIPT.resolve()  # one copy, linked
    assert (fleet / "fleet_report.py").read_text() == FLEET_SCRIPT.read_text()
    config = json.loads((fleet / "mcp_servers.json").read_text())
    assert config["mcpServers"]["fleet"]["args"] == ["-m", "sagents.demo.fleet_server"]


def test_the_demo_without_bubblewrap_says_so_and_prints_no_empty_records(tmp_path: Path) -> None:
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    ran = run_cli(
        "demo", "--workspace", str(tmp_path / "ws"), cwd=tmp_path, data_dir=tmp_path / "data",
        env={"PATH": str(no_bwrap)},
    )  # fmt: skip
    assert ran.returncode == 1
    assert ran.stdout.startswith("run_script sandbox_error: ")
    assert "apt-get install bubblewrap" in ran.stdout
    assert "None" not in ran.stdout
    assert "null" not in ran.stdout
