"""The pre-flight corpus (``fixtures/preflight_corpus``) and the reference servers' tools,
listed live from the real servers.

Each corpus file is a realistic run_script script with mistakes; a line holding a statically
visible mistake ends with ``# MISTAKE``. A file's first lines may set the run: ``# tools: a, b``
(the ``tools`` argument) and ``# mode: ask|auto|read_only``.

fleet (the demo, in process), git (the reference ``mcp-server-git`` peer), memory and todo
(sagents' own servers, over stdio): their ``tools/list`` answers become the specs a pre-flight
plan is built from, as the gateway builds them (:func:`sagents.mcp._convert.tool_to_spec`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from sagents.core._permissions import PermissionMode
from sagents.core._spec import ToolSpec
from sagents.demo.fleet_server import build_server
from sagents.mcp._convert import tool_to_spec
from sagents.mcp._settings import ServerSettings

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "fixtures" / "preflight_corpus"
PEER_GIT = ROOT / ".peers" / "venv" / "bin" / "mcp-server-git"
MISTAKE = "# MISTAKE"


def _servers(data_dir: Path) -> dict[str, Any]:
    def own(module: str) -> StdioServerParameters:
        db = str(data_dir / f"{module}.sqlite3")
        return StdioServerParameters(
            command=sys.executable, args=["-m", f"sagents.mcp_servers.{module}", "--db", db]
        )

    return {
        "fleet": build_server(),
        "git": StdioServerParameters(command=str(PEER_GIT), args=["--repository", str(ROOT)]),
        "memory": own("memory"),
        "todo": own("todo"),
    }


async def reference_specs(data_dir: Path) -> list[ToolSpec]:
    """Every tool of the reference servers, as specs (``<server>__<tool>``)."""
    specs: list[ToolSpec] = []
    for server, target in _servers(data_dir).items():
        async with Client(target) as client:
            listed = await client.list_tools()
            specs += [
                tool_to_spec(server, tool, ServerSettings(), protocol_version=None)
                for tool in listed.tools
            ]
    return specs


@dataclass(frozen=True, kw_only=True)
class CorpusScript:
    """One broken script: its run settings and the lines of its visible mistakes."""

    name: str
    code: str
    tools: tuple[str, ...]
    mode: PermissionMode
    mistakes: frozenset[int]


def _header(code: str, key: str) -> str | None:
    found = re.search(rf"^# {key}: *(.*)$", code, re.MULTILINE)
    return found.group(1).strip() if found else None


def corpus_scripts() -> list[CorpusScript]:
    """Every file of the corpus, in name order."""
    scripts = []
    for path in sorted(CORPUS.glob("*.py")):
        code = path.read_text()
        tools = _header(code, "tools")
        mode = _header(code, "mode") or "ask"
        assert mode in ("ask", "auto", "read_only"), path
        lines = code.splitlines()
        scripts.append(
            CorpusScript(
                name=path.name,
                code=code,
                tools=tuple(t.strip() for t in tools.split(",") if t.strip()) if tools else (),
                mode=mode,  # type: ignore[arg-type]  # checked just above
                mistakes=frozenset(i + 1 for i, line in enumerate(lines) if MISTAKE in line),
            )
        )
    return scripts
