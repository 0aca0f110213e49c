"""Benchmark of an MCP server's skills fetched lazily (``MCPSkillSource``) against fetching them
all up front, over an in-memory server (no transport, so only the host's own work counts).

Run: .venv/bin/python bench/bench_upstream_skills.py

The server offers SKILLS skills of FILES_PER_SKILL files. Figures, each against a baseline
measured in the same run:
- upstream requests and bytes sent for listing the skills and loading one (lazy) vs listing
  and fetching every skill (eager, what ``fetch_mcp_skills`` does);
- host time of the same two;
- a second use of the loaded skill (served from its verified copy) vs its first fetch.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types as mt

from sagents.mcp._ext_types import ListSkillsResult, SkillEntry, SkillFile
from sagents.skill._mcp_source import MCPSkillSource, SkillServer

SKILLS = 100  # skills the server offers
FILES_PER_SKILL = 8  # files of each skill besides SKILL.md
FILE_BYTES = 4096  # bytes of each of those files
REPEATS = 3


class _Server:
    """An in-memory Skills server; counts requests and bytes sent."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.entries: list[SkillEntry] = []
        for index in range(SKILLS):
            name = f"skill-{index:03d}"
            paths = {"SKILL.md": f"---\nname: {name}\ndescription: Task {index}\n---\nDo.\n"}
            for number in range(FILES_PER_SKILL):
                paths[f"references/r{number}.md"] = "x" * FILE_BYTES
            resources = []
            for path, text in paths.items():
                uri = f"skill://{name}/{path}"
                data = text.encode()
                self.files[uri] = data
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                resources.append(SkillFile(uri=uri, digest=digest, size=len(data)))
            self.entries.append(
                SkillEntry(
                    uri=f"skill://{name}/SKILL.md",
                    frontmatter={"name": name, "description": f"Task {index}"},
                    resources=resources,
                )
            )
        self.requests = 0
        self.bytes = 0

    async def list_skills(self, server: str, cursor: str | None) -> ListSkillsResult:
        self.requests += 1
        result = ListSkillsResult(skills=self.entries)
        self.bytes += len(result.model_dump_json(by_alias=True))
        return result

    async def read_resource(self, server: str, uri: str) -> mt.ReadResourceResult:
        self.requests += 1
        self.bytes += len(self.files[uri])
        text = self.files[uri].decode()
        return mt.ReadResourceResult(contents=[mt.TextResourceContents(uri=uri, text=text)])


async def _run(eager: bool, root: Path) -> tuple[float, float, float, int, int]:
    """(seconds to list and load, seconds of a second use, seconds of the first fetch,
    requests, bytes)."""
    server = _Server()
    source = MCPSkillSource([SkillServer(name="docs")], server, root / "cache")
    async with source:
        start = time.perf_counter()
        await source.refresh("docs")
        names = source.list_skill_names()
        first_start = time.perf_counter()
        await source.fetch_skill(names[0])
        first = time.perf_counter() - first_start
        if eager:
            for name in names[1:]:
                await source.fetch_skill(name)
        total = time.perf_counter() - start
        again_start = time.perf_counter()
        await source.fetch_skill(names[0])
        again = time.perf_counter() - again_start
    return total, again, first, server.requests, server.bytes


async def main() -> None:
    lazy_runs, eager_runs = [], []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            lazy_runs.append(await _run(False, Path(tmp)))
        with tempfile.TemporaryDirectory() as tmp:
            eager_runs.append(await _run(True, Path(tmp)))
    lazy, eager = min(lazy_runs), min(eager_runs)
    print(f"{SKILLS} skills x {FILES_PER_SKILL + 1} files ({FILE_BYTES} B each), best of {REPEATS}")
    print(f"upstream requests: lazy {lazy[3]} vs eager {eager[3]}: {lazy[3] / eager[3]:.3f}x")
    print(f"bytes sent:        lazy {lazy[4]} vs eager {eager[4]}: {lazy[4] / eager[4]:.3f}x")
    print(
        f"host time to list and load one: lazy {lazy[0] * 1000:.1f} ms vs eager "
        f"{eager[0] * 1000:.1f} ms: {lazy[0] / eager[0]:.3f}x"
    )
    print(
        f"second use vs first fetch of one skill: {lazy[1] * 1e6:.0f} us vs "
        f"{lazy[2] * 1e6:.0f} us: {lazy[1] / lazy[2]:.4f}x"
    )


if __name__ == "__main__":
    anyio.run(main)
