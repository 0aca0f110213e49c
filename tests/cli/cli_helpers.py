"""Running the installed ``sagents`` command in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAGENTS = Path(sys.executable).parent / "sagents"
PEER_GIT = REPO / ".peers" / "venv" / "bin" / "mcp-server-git"
CLI_TIMEOUT_S = 180.0  # bound on one command (a loaded 2-core machine)


@dataclass(frozen=True, kw_only=True)
class Ran:
    """A finished command."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        """stdout as exactly one JSON object (fails the test otherwise)."""
        lines = self.stdout.splitlines()
        assert len(lines) == 1, f"stdout is not one line:\n{self.stdout}\nstderr:\n{self.stderr}"
        value = json.loads(lines[0])
        assert isinstance(value, dict)
        return value


def run_cli(*args: str, cwd: Path, data_dir: Path, env: dict[str, str] | None = None) -> Ran:
    """Run ``sagents ARGS`` without a terminal (stdin from /dev/null)."""
    full_env = {**os.environ, "SAGENTS_DATA_DIR": str(data_dir), **(env or {})}
    done = subprocess.run(
        [str(SAGENTS), *args],
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    return Ran(returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)


def fleet_config(path: Path, **scripts: Any) -> Path:
    """Write a config with the bundled fleet server (and a ``scripts`` block) to ``path``."""
    config: dict[str, Any] = {
        "mcpServers": {
            "fleet": {"command": sys.executable, "args": ["-m", "sagents.demo.fleet_server"]}
        }
    }
    if scripts:
        config["scripts"] = scripts
    path.write_text(json.dumps(config))
    return path


def _read_until(fd: int, needle: bytes, seen: bytearray, deadline: float) -> None:
    """Read the terminal until ``needle`` appears (bounded by ``deadline``)."""
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {needle!r} on the terminal:\n{seen.decode(errors='replace')}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the other side closed
                chunk = b""
            assert chunk, f"terminal closed before {needle!r}:\n{seen.decode(errors='replace')}"
            seen += chunk


def _drain(fd: int, seen: bytearray) -> None:
    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        seen += chunk


def run_on_terminal(
    argv: list[str], *, cwd: Path, env: dict[str, str], prompt: bytes, answer: bytes
) -> tuple[int, str, str]:
    """Run ``argv`` with stdin and stderr on a pseudo-terminal, wait for ``prompt`` there and
    type ``answer``. Returns the exit code, stdout and what the terminal showed."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        argv, stdin=follower, stderr=follower, stdout=subprocess.PIPE, env=env, cwd=cwd
    )
    os.close(follower)
    seen = bytearray()
    try:
        _read_until(leader, prompt, seen, time.monotonic() + CLI_TIMEOUT_S)
        os.write(leader, answer)
        stdout, _ = process.communicate(timeout=CLI_TIMEOUT_S)
        _drain(leader, seen)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    return process.returncode, stdout.decode(), seen.decode(errors="replace")
